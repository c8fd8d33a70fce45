"""``python -m bayescal``: the command line (:mod:`bayescal.cli`)."""

import sys

from bayescal.cli import main

sys.exit(main())
