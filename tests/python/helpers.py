"""What several test files share that is not a fixture."""

from __future__ import annotations

import subprocess


def run(cli, *args, **kw):
    """The heapkit command (or any), its arguments as strings, output captured as text."""
    return subprocess.run([*cli, *map(str, args)], capture_output=True, text=True, **kw)
