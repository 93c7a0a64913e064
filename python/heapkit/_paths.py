"""Where the compiled parts live: inside the installed package (heapkit/bin, heapkit/lib)."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def library(name: str) -> Path | None:
    """The path of a shared library shipped with the package (e.g. ``libheapkit-record.so``).

    ``HEAPKIT_LIB_DIR`` names another directory to look in first (a development build).
    """
    dirs = []
    if os.environ.get("HEAPKIT_LIB_DIR"):
        dirs.append(Path(os.environ["HEAPKIT_LIB_DIR"]))
    dirs.append(PACKAGE_DIR / "lib")
    for d in dirs:
        candidate = d / name
        if candidate.is_file():
            return candidate
    return None


def program(name: str) -> Path:
    """The path of a program shipped with the package (e.g. ``heapkit-replay``)."""
    candidate = PACKAGE_DIR / "bin" / name
    if not candidate.is_file():
        raise FileNotFoundError(f"{candidate} is missing: reinstall the heapkit package")
    return candidate
