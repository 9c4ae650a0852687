"""Where codemode keeps its files on this machine: one data directory for every layer.

The embedded server's SQLite file, the default object store (``blobs/``) and the runtimes'
caches (downloaded sandboxes, images, snapshots) all live under it. ``CODEMODE_DATA_DIR``
moves it (tests point it at a temporary folder). Defined in the lowest layer so that every
layer can find it without importing the one above.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

#: Overrides the data directory.
DATA_DIR_ENV = "CODEMODE_DATA_DIR"


def data_dir() -> Path:
    """``CODEMODE_DATA_DIR``, else the user's data dir (``~/.local/share/codemode`` on Linux)."""
    return Path(os.environ.get(DATA_DIR_ENV) or user_data_dir("codemode"))


def cache_dir(name: str) -> Path:
    """``<data dir>/cache/<name>``: what a runtime downloads or builds once and reuses."""
    return data_dir() / "cache" / name
