"""Reading heapkit traces (the format is described in docs/trace-format.md)."""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from typing import Iterator

import numpy as np

from heapkit import _core

#: Operation codes in the ``op`` column of :func:`events`.
OPS = {0: "malloc", 1: "calloc", 2: "realloc", 3: "aligned", 4: "free"}


@dataclass(frozen=True)
class Header:
    """What a trace says about itself."""

    version: str
    pid: int
    start_unix_ns: int
    command: str
    source: str  # "record", "text", "mtrace", "heaptrack"


def read_header(path: str | PathLike) -> Header:
    """The header of the trace at ``path``; raises :class:`heapkit.TraceError` if it is not one."""
    return Header(**_core.TraceReader(str(path)).header)


def events(path: str | PathLike, chunk: int = 1 << 20) -> Iterator[dict[str, np.ndarray]]:
    """The trace's operations, ``chunk`` at a time, as numpy columns.

    Columns: ``op`` (see :data:`OPS`), ``thread`` (dense index), ``time`` (ns since the
    start), ``id`` (the object allocated or freed), ``old_id`` (the object a realloc
    replaced), ``size`` and ``alignment``. The whole trace is checked as it is read: a
    corrupt or truncated one raises :class:`heapkit.TraceError` with the byte offset.
    ``pandas.DataFrame(columns)`` turns a chunk into a table.
    """
    reader = _core.TraceReader(str(path))
    while True:
        columns = reader.read(chunk)
        if len(columns["op"]) == 0:
            return
        yield columns


def trace_prefix(source: str | PathLike, output: str | PathLike, max_events: int) -> int:
    """Writes the first ``max_events`` operations of ``source`` as a trace of their own (objects
    still live at the cut stay live); returns how many it wrote."""
    return _core.trace_prefix(str(source), str(output), max_events)
