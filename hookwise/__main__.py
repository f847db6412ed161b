"""`python -m hookwise ...` is the `hookwise` command."""

from hookwise.server.cli import main

raise SystemExit(main())
