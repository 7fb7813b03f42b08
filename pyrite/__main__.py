"""`python -m pyrite ...`: the same as the `pyrite` command."""

import sys

from .cli import main

sys.exit(main())
