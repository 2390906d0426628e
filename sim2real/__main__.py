"""`python -m sim2real`: the same as the `sim2real` console script."""

import sys

from sim2real.cli import main

sys.exit(main())
