"""`python -m hookwise.server.cli.main ...` is the `hookwise` command."""

from .main import main

raise SystemExit(main())
