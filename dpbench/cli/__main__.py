"""`python -m dpbench.cli`: the `dpbench` command."""

from dpbench.cli.main import main

main()
