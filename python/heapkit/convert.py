"""Conversions between heapkit traces and other allocation logs.

* ``text``: the DMM papers' profiling format, one line per event:
  ``<time> new <address> <size>`` or ``<time> delete <address>`` (heapkit's TraceHeap
  layer writes it).
* ``mtrace``: the log glibc writes after ``mtrace()`` with ``MALLOC_TRACE`` set.
* ``heaptrack``: heaptrack's data files: the raw one (``heaptrack --raw``, usually
  ``.raw.zst``) and the interpreted one that ``heaptrack_print`` and ``heaptrack_gui`` read
  (``heaptrack.prog.123.zst``). heapkit exports the interpreted one.

Inputs may be compressed (``.gz``, ``.xz``, ``.zst``); they are streamed, never loaded whole.
Outputs whose names end so are compressed the same way.
"""

from __future__ import annotations

import gzip
import lzma
import os
import shlex
from os import PathLike
from pathlib import Path
from typing import BinaryIO, Callable, Optional

from heapkit import _core

#: Log formats heapkit converts from, and to.
LOG_FORMATS = ("text", "mtrace", "heaptrack")
EXPORT_FORMATS = ("text", "mtrace", "heaptrack")

Progress = Optional[Callable[[int, int], None]]  # (done, total) in bytes

_MAGIC = b"\x89HKT"
_CHUNK = 1 << 20


def is_trace(path: str | PathLike) -> bool:
    """True if the file starts like a heapkit trace."""
    with open(path, "rb") as f:
        return f.read(4) == _MAGIC


def _decompressed(raw: BinaryIO) -> BinaryIO:
    """``raw`` itself, or a decompressing reader over it (raw.tell() still gives progress)."""
    head = raw.peek(6)[:6] if hasattr(raw, "peek") else b""
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if head.startswith(b"\xfd7zXZ"):
        return lzma.LZMAFile(raw, "rb")
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, closefd=False)
    return raw


def detect_format(path: str | PathLike) -> str:
    """Guesses the log format from the first meaningful line (see :data:`LOG_FORMATS`)."""
    with open(path, "rb") as raw:
        head = _decompressed(raw).read(64 * 1024).decode("utf-8", "replace")
    for line in head.splitlines():
        tokens = line.split()
        if not tokens or tokens[0].startswith("#"):
            continue
        if tokens[0] in ("=", "@"):
            return "mtrace"
        if tokens[0] == "v" or (len(tokens[0]) == 1 and tokens[0] in "xXImtc+-"):
            return "heaptrack"
        if tokens[0].isdigit() and len(tokens) >= 2 and tokens[1] in ("new", "delete"):
            return "text"
        break
    raise ValueError(f"{path}: cannot tell the log's format; name it (text, mtrace, heaptrack)")


def import_log(
    source: str | PathLike,
    output: str | PathLike,
    format: str | None = None,
    lenient: bool = False,
    progress: Progress = None,
) -> dict:
    """Converts a log (``format`` or detected) into the heapkit trace ``output``.

    Strict by default: a free of an address that was never allocated is an error (a
    :class:`heapkit.TraceError` naming the line). ``lenient`` skips such frees and counts
    them, for logs that began after the program did. Returns counts: lines, events,
    objects, unknown_frees, reused_addresses, failed_allocations, bytes_written.
    """
    source = Path(source)
    format = format or detect_format(source)
    if format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {format!r} (choose from {', '.join(LOG_FORMATS)})")
    total = os.path.getsize(source)
    importer = _core.Importer(format, str(output), lenient, f"{format} log {shlex.quote(str(source))}")
    with open(source, "rb") as raw:
        stream = _decompressed(raw)
        while True:
            data = stream.read(_CHUNK)
            if not data:
                break
            importer.feed(data)
            if progress:
                progress(min(raw.tell(), total), total)
    summary = importer.finish()
    if progress:
        progress(total, total)
    return summary


def _compressor(path: Path) -> Optional[Callable[[BinaryIO], BinaryIO]]:
    """A writer that compresses into a binary file, chosen by ``path``'s suffix, or None."""
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return lambda raw: gzip.GzipFile(fileobj=raw, mode="wb")
    if suffix == ".xz":
        return lambda raw: lzma.LZMAFile(raw, "wb")
    if suffix == ".zst":
        import zstandard

        return lambda raw: zstandard.ZstdCompressor().stream_writer(raw, closefd=False)
    return None


def export_log(trace: str | PathLike, output: str | PathLike, format: str, progress: Progress = None) -> int:
    """Writes the heapkit trace as a ``text``, ``mtrace`` or ``heaptrack`` log; returns the
    operations written. An output named ``.gz``, ``.xz`` or ``.zst`` is compressed.

    Traces hold object ids, not addresses: text and mtrace logs get distinct synthetic
    addresses; a realloc becomes a delete and a new in ``text``, mtrace's ``<``/``>`` pair
    in ``mtrace``. ``heaptrack`` writes heaptrack's interpreted data file, which
    ``heaptrack_print`` and ``heaptrack_gui`` read: every kind of call is a frame of its own
    (malloc, calloc, realloc, aligned_alloc), times are in milliseconds, and threads are in
    comments that heaptrack skips and :func:`import_log` reads back.
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"cannot convert to {format!r} (choose from {', '.join(EXPORT_FORMATS)})")
    output = Path(output)
    compress = _compressor(output)
    # The exporter writes plain text; a compressed output is made from it afterwards.
    plain = output.with_name(output.name + ".part") if compress else output
    try:
        exporter = _core.Exporter(str(trace), format, str(plain))
        while exporter.step(1 << 18):
            if progress:
                progress(exporter.offset, exporter.size)
        if compress:
            with open(plain, "rb") as source, open(output, "wb") as raw:
                with compress(raw) as sink:
                    while data := source.read(_CHUNK):
                        sink.write(data)
    finally:
        if compress:
            plain.unlink(missing_ok=True)
    if progress:
        progress(exporter.size, exporter.size)
    return exporter.events
