"""``python -m histboost``: the command-line interface (see `histboost.cli`)."""

import sys

from .cli import main

sys.exit(main())
