"""``python -m ssegate``."""

import sys

from ssegate.cli import main

sys.exit(main())
