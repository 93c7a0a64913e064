"""Recording: run an unmodified program under the preloaded recorder and merge what it
wrote into one trace per process image."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Callable, Optional, Sequence

from heapkit import _core
from heapkit._paths import library

_SPOOL = re.compile(r"^(\d+)-(\d+)\.spool$")


@dataclass(frozen=True)
class RecordedTrace:
    path: Path
    pid: int
    image: int  # 0 for the process as forked, 1 after its first exec, ...
    command: str
    events: int
    objects: int
    threads: int
    unknown_frees: int  # frees of memory allocated before recording began
    truncated_records: int  # records cut short by a kill
    bytes: int


@dataclass(frozen=True)
class RecordResult:
    """What ``record`` produced: ``main`` is the trace of the command's own process (its
    last exec image), ``traces`` every trace, children and earlier images included."""

    returncode: int  # the program's exit status; -N if a signal N ended it
    main: Optional[RecordedTrace]
    traces: list[RecordedTrace] = field(default_factory=list)


def recorder_library() -> Path:
    lib = library("libheapkit-record.so")
    if lib is None:
        raise FileNotFoundError("libheapkit-record.so is not installed with this heapkit package")
    return lib


def _name(output: Path, pid: int, image: int, main: bool) -> Path:
    if main:
        return output
    suffix = f".{pid}" if image == 0 else f".{pid}-{image}"
    return output.with_name(output.stem + suffix + output.suffix)


def record(
    command: Sequence[str],
    output: str | PathLike,
    keep_spool: str | PathLike | None = None,
    on_merge: Optional[Callable[[int, int], None]] = None,
    env: Optional[dict[str, str]] = None,
) -> RecordResult:
    """Runs ``command`` with every malloc-family call recorded; writes traces.

    The main process's trace goes to ``output``; a child process (fork) or an earlier
    process image (before exec) ``P`` goes to ``<stem>.P<suffix>`` (``.P-N`` for image N).
    Images other than the main one that made no calls (a fork that went straight to
    exec) leave no trace. Calls made before the recorder initialised (by the dynamic linker) are not in the
    trace; frees of them are counted as ``unknown_frees``. If the program crashes, what it
    had recorded up to the crash is still merged. ``keep_spool`` names a directory to
    keep the raw spools in. ``on_merge(done, total)`` reports merging progress.
    """
    if not command:
        raise ValueError("no command to record")
    output = Path(output)
    spool_dir = Path(keep_spool) if keep_spool else Path(tempfile.mkdtemp(prefix="heapkit-record-"))
    spool_dir.mkdir(parents=True, exist_ok=True)
    try:
        run_env = dict(os.environ if env is None else env)
        preload = str(recorder_library())
        if run_env.get("LD_PRELOAD"):
            preload += ":" + run_env["LD_PRELOAD"]
        run_env["LD_PRELOAD"] = preload
        run_env["HEAPKIT_RECORD_DIR"] = str(spool_dir)
        process = subprocess.Popen(list(command), env=run_env)
        try:
            returncode = process.wait()
        except KeyboardInterrupt:
            # The program got the SIGINT too; let it flush and finish, then merge.
            process.send_signal(signal.SIGINT)
            returncode = process.wait()
        spools = []
        for entry in spool_dir.iterdir():
            m = _SPOOL.match(entry.name)
            if m:
                spools.append((int(m.group(1)), int(m.group(2)), entry))
        spools.sort()
        main_key = max(((pid, image) for pid, image, _ in spools if pid == process.pid), default=None)
        output.parent.mkdir(parents=True, exist_ok=True)
        traces: list[RecordedTrace] = []
        main = None
        for done, (pid, image, spool) in enumerate(spools):
            is_main = (pid, image) == main_key
            path = _name(output, pid, image, is_main)
            s = _core.merge_spool(str(spool), str(path))
            if s["events"] == 0 and not is_main:
                # A forked child that went straight to exec: its image did nothing to keep.
                path.unlink()
                if on_merge:
                    on_merge(done + 1, len(spools))
                continue
            trace = RecordedTrace(path, pid, image, s["command"], s["events"], s["objects"], s["threads"],
                                  s["unknown_frees"], s["truncated_records"], s["bytes_written"])
            traces.append(trace)
            if is_main:
                main = trace
            if on_merge:
                on_merge(done + 1, len(spools))
        return RecordResult(returncode, main, traces)
    finally:
        if not keep_spool:
            shutil.rmtree(spool_dir, ignore_errors=True)
