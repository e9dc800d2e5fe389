"""``python -m training.whatif``: see :mod:`training.whatif.cli`."""

import sys

from training.whatif.cli import main

sys.exit(main())
