"""Puts this folder on ``sys.path``, so that test folders share the helper modules kept
here (e.g. :mod:`group_kinds`)."""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
