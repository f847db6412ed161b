"""The `hookwise` command line: its entry point (`main`), the shared options, and one module per group
of subcommands. Nothing outside this package imports it."""
