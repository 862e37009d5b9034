"""The command line's commands, one module per group; `jobs.cli` builds the parser from them."""
