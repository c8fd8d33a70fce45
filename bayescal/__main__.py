"""``python -m bayescal``: the command line (:mod:`bayescal.cli`)."""

import sys

from bayescal.cli import main

if __name__ == "__main__":
    sys.exit(main())
