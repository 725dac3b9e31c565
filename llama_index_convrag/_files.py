"""File helpers shared by units on higher floors: the SHA-256 of a file, read in blocks."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    """The hex SHA-256 of ``path``'s bytes (read 1 MiB at a time)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
