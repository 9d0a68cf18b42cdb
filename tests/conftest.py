from __future__ import annotations

import os
import sys

# tests import reference models as `tests.models.zoo`
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
