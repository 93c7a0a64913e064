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

import contextlib
import errno
import gzip
import lzma
import os
import shlex
import stat
import zlib
from os import PathLike
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Optional

from heapkit import _core

#: Log formats heapkit converts from, and to.
LOG_FORMATS = ("text", "mtrace", "heaptrack")
EXPORT_FORMATS = ("text", "mtrace", "heaptrack")

Progress = Optional[Callable[[int, int], None]]  # (done, total) in bytes

_MAGIC = b"\x89HKT"
_CHUNK = 1 << 20


def _open_input(path: str | PathLike) -> BinaryIO:
    """Opens a file to read, refusing what is not a regular file (a FIFO would block)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path}: not a regular file")
    return open(path, "rb")


def is_trace(path: str | PathLike) -> bool:
    """True if the file starts like a heapkit trace."""
    with _open_input(path) as f:
        return f.read(4) == _MAGIC


class _ZstdStream:
    """Reads zstd frames one after another and, unlike zstandard's stream reader, fails on
    a stream that ends inside a frame instead of returning what it had."""

    def __init__(self, raw: BinaryIO):
        import zstandard

        self._new = zstandard.ZstdDecompressor().decompressobj
        self._raw = raw
        self._frame = self._new()
        self._started = False
        self._pending = bytearray()

    def read(self, size: int) -> bytes:
        while len(self._pending) < size:
            data = self._raw.read(_CHUNK)
            if not data:
                if self._started and not self._frame.eof:
                    raise EOFError("the zstd stream ends inside a frame")
                break
            while data:
                if self._frame.eof:
                    self._frame = self._new()
                self._started = True
                self._pending += self._frame.decompress(data)
                data = self._frame.unused_data if self._frame.eof else b""
        chunk = bytes(self._pending[:size])
        del self._pending[:size]
        return chunk


def _decompressed(raw: BinaryIO) -> BinaryIO:
    """``raw`` itself, or a decompressing reader over it (raw.tell() still gives progress)."""
    head = raw.peek(6)[:6] if hasattr(raw, "peek") else b""
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if head.startswith(b"\xfd7zXZ"):
        return lzma.LZMAFile(raw, "rb")
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return _ZstdStream(raw)
    return raw


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (EOFError, zlib.error, lzma.LZMAError)
    try:
        import zstandard

        errors += (zstandard.ZstdError,)
    except ImportError:
        pass
    return errors


@contextlib.contextmanager
def _read_compressed(path: Path) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """(raw file, decompressed stream) of a log; a corrupt or truncated compressed stream
    becomes a ValueError naming the file."""
    with _open_input(path) as raw:
        try:
            yield raw, _decompressed(raw)
        except _decompression_errors() as error:
            raise ValueError(f"{path}: corrupt or truncated compressed data ({error})") from None


@contextlib.contextmanager
def _replacing(output: Path) -> Iterator[Path]:
    """A temporary file beside ``output`` that becomes ``output`` only when the block
    succeeds: a failed conversion leaves an existing file as it was, and converting a file
    onto itself reads the original to the end. An output that is not a regular file
    (/dev/stdout, a pipe) is written directly: renaming over it would replace the device."""
    if output.exists() and not output.is_file():
        yield output
        return
    directory = output.parent
    if not directory.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(directory))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "cannot create files in this directory", str(directory))
    temporary = output.with_name(f".{output.name}.{os.getpid()}.partial")
    try:
        yield temporary
        os.replace(temporary, output)
    finally:
        temporary.unlink(missing_ok=True)


def detect_format(path: str | PathLike) -> str:
    """Guesses the log format from the first meaningful line (see :data:`LOG_FORMATS`)."""
    with _read_compressed(Path(path)) as (_, stream):
        head = stream.read(64 * 1024).decode("utf-8", "replace")
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
    with _replacing(Path(output)) as temporary:
        importer = _core.Importer(format, str(temporary), lenient, f"{format} log {shlex.quote(str(source))}")
        with _read_compressed(source) as (raw, stream):
            while data := stream.read(_CHUNK):
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
    with _replacing(output) as temporary:
        # The exporter writes plain text; a compressed output is made from it afterwards.
        plain = temporary.with_name(temporary.name + ".plain") if compress else temporary
        try:
            exporter = _core.Exporter(str(trace), format, str(plain))
            while exporter.step(1 << 18):
                if progress:
                    progress(exporter.offset, exporter.size)
            if compress:
                with open(plain, "rb") as source, open(temporary, "wb") as raw:
                    with compress(raw) as sink:
                        while data := source.read(_CHUNK):
                            sink.write(data)
        finally:
            if compress:
                plain.unlink(missing_ok=True)
    if progress:
        progress(exporter.size, exporter.size)
    return exporter.events
