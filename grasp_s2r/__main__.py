"""``python -m grasp_s2r`` is ``grasp-s2r``."""

import sys

from grasp_s2r.cli import main

sys.exit(main())
