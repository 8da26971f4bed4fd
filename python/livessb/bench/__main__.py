"""``python -m livessb.bench``: the benchmark runner's command line."""

import sys

from .runner import main

sys.exit(main())
