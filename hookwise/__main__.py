"""`python -m hookwise ...` is the `hookwise` command."""

from hookwise.server.cli.main import main

raise SystemExit(main())
