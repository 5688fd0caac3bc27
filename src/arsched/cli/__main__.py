"""`python -m arsched.cli`: the same as the `arsched` command."""

from arsched.cli import main

main()
