"""`python -m edgecnn` runs the command-line interface."""

from edgecnn.cli.app import main

main()
