"""Helpers shared by the command-line tests."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_digest(path: Path) -> str:
    """SHA-256 of the file's bytes: equal before and after means nothing changed."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
