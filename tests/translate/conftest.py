"""Puts this folder on ``sys.path`` so that the library test folders can import ``one_node``.

pytest's default (prepend) import mode already inserts a conftest's folder; the explicit
insertion keeps ``from one_node import ...`` working under other import modes.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
