"""`python -m evalgate.cli`: the same as the `evalgate` command."""

import sys

from evalgate.cli import main

sys.exit(main())
