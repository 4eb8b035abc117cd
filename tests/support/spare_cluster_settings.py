"""Settings for a ``manage.py`` child that works on a spare embedded cluster.

The project's own settings (with ``DATABASE_URL`` unset: the embedded server),
with the checkout's ``var/`` swapped for the folder named in
``NUDGE_SPARE_STATE_DIR``: the child starts, repairs and inspects that cluster,
never the one the test suite itself may be running on (tests/test_embedded_db.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from nudgeproject.settings import *  # noqa: F403
from nudgeproject.settings import DATABASES

STATE_DIR = Path(os.environ["NUDGE_SPARE_STATE_DIR"])
DATABASES = {"default": {**DATABASES["default"], "HOST": "", "EMBEDDED_STATE_DIR": str(STATE_DIR)}}
