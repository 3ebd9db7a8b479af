"""`python -m evalgate.cli`: the same as the `evalgate` command."""

from evalgate.cli import console

console()
