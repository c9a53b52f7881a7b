"""`python -m harness` is `ddpbench`."""

import sys

from harness.cli import main

sys.exit(main())
