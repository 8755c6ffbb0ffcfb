"""`python -m laredo_cli` runs the `laredo` command line."""

from laredo_cli.main import main

main()
