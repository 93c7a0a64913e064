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

    @property
    def executable(self) -> str:
        """The program the process ran: its argv[0] as it saw it (empty if unknown)."""
        return self.command.split(" ", 1)[0] if self.command else ""

    def to_dict(self) -> dict:
        return {"path": str(self.path), "pid": self.pid, "image": self.image, "command": self.command,
                "executable": self.executable, "events": self.events, "objects": self.objects,
                "threads": self.threads, "unknown_frees": self.unknown_frees,
                "truncated_records": self.truncated_records, "bytes": self.bytes}

    @classmethod
    def from_dict(cls, d: dict) -> "RecordedTrace":
        return cls(Path(d["path"]), d["pid"], d["image"], d["command"], d["events"], d["objects"], d["threads"],
                   d["unknown_frees"], d["truncated_records"], d["bytes"])


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
    stdin=None,
    stdout=None,
    stderr=None,
) -> RecordResult:
    """Runs ``command`` with every malloc-family call recorded; writes traces.

    The main process's trace goes to ``output``; a child process (fork) or an earlier
    process image (before exec) ``P`` goes to ``<stem>.P<suffix>`` (``.P-N`` for image N).
    Images other than the main one that made no calls (a fork that went straight to
    exec) leave no trace. Calls made before the recorder initialised (by the dynamic linker) are not in the
    trace; frees of them are counted as ``unknown_frees``. If the program crashes, what it
    had recorded up to the crash is still merged. ``keep_spool`` names a directory to
    keep the raw spools in. ``on_merge(done, total)`` reports merging progress. ``stdin``,
    ``stdout`` and ``stderr`` go to ``subprocess.Popen`` (default: this process's).
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
        process = subprocess.Popen(list(command), env=run_env, stdin=stdin, stdout=stdout, stderr=stderr)
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
        if main is None:
            # The command's own process never called the malloc family (the recorder
            # starts with the first call): its trace is empty, but it exists.
            s = _core.concat_traces([], str(output), " ".join(command), process.pid)
            main = RecordedTrace(output, process.pid, 0, " ".join(command), 0, 0, 0, 0, 0, output.stat().st_size)
            traces.insert(0, main)
        return RecordResult(returncode, main, traces)
    finally:
        if not keep_spool:
            shutil.rmtree(spool_dir, ignore_errors=True)


# ---- the processes of a command -------------------------------------------------------------

@dataclass(frozen=True)
class Executable:
    """The processes of one program among those a command started, busiest first."""

    name: str
    processes: list[RecordedTrace]

    @property
    def events(self) -> int:
        return sum(t.events for t in self.processes)


def executables(traces: Sequence[RecordedTrace]) -> list[Executable]:
    """The programs the traces' processes ran, the one that made the most malloc-family
    calls first (then by name)."""
    groups: dict[str, list[RecordedTrace]] = {}
    for t in traces:
        groups.setdefault(t.executable, []).append(t)
    found = [Executable(name, sorted(group, key=lambda t: (-t.events, t.pid, t.image))) for name, group in groups.items()]
    return sorted(found, key=lambda e: (-e.events, e.name))


@dataclass(frozen=True)
class Selection:
    """The trace chosen among a command's processes: one process, or every process of one
    program merged (one after the other, each one's leftovers freed at its end)."""

    trace: Path
    executable: str
    processes: list[RecordedTrace]
    merged: bool
    events: int
    programs: list[Executable]  # every program the command ran, busiest first

    def describe(self) -> str:
        if not self.events:
            return "the program made no allocations"
        what = (f"{len(self.processes)} processes of {self.executable} merged" if self.merged
                else f"{self.executable} (pid {self.processes[0].pid})")
        started = sum(len(p.processes) for p in self.programs)
        line = f"tuned on {what}: {self.events:,} operations"
        if started > 1:
            others = ", ".join(f"{Path(p.name).name or '?'} {p.events:,}" for p in self.programs[:4])
            line += f" (the command started {started} processes; operations by program: {others}"
            line += ", ...)" if len(self.programs) > 4 else ")"
        return line

    def to_dict(self) -> dict:
        return {"trace": str(self.trace), "executable": self.executable, "merged": self.merged, "events": self.events,
                "processes": [t.to_dict() for t in self.processes],
                "programs": [{"name": p.name, "events": p.events, "processes": [t.to_dict() for t in p.processes]}
                             for p in self.programs]}

    @classmethod
    def from_dict(cls, d: dict) -> "Selection":
        return cls(Path(d["trace"]), d["executable"], [RecordedTrace.from_dict(t) for t in d["processes"]], d["merged"],
                   d["events"], [Executable(p["name"], [RecordedTrace.from_dict(t) for t in p["processes"]])
                                 for p in d["programs"]])


def select_process(traces: Sequence[RecordedTrace], output: str | PathLike, process: Optional[str] = None,
                   merge: bool = False) -> Selection:
    """Writes to ``output`` the trace to tune on, among ``traces`` (one command's): by
    default the busiest process of the program that made the most calls; ``process``
    names another program (its path or file name, as the process's argv[0]) or one
    process (its pid); ``merge`` takes every process of that program, one after the
    other. Raises ValueError naming the programs when ``process`` matches none."""
    output = Path(output)
    programs = executables(traces)
    if process is None:
        chosen = programs[0] if programs else Executable("", [])
        processes = chosen.processes[:1] if not merge else chosen.processes
    else:
        by_pid = [t for t in traces if process.isdigit() and t.pid == int(process)]
        matches = [p for p in programs if process in (p.name, Path(p.name).name)]
        if by_pid and not merge:
            chosen, processes = next(p for p in programs if by_pid[0] in p.processes), by_pid[:1]
        elif matches or by_pid:
            chosen = matches[0] if matches else next(p for p in programs if by_pid[0] in p.processes)
            processes = chosen.processes if merge else chosen.processes[:1]
        else:
            names = ", ".join(f"{Path(p.name).name} ({len(p.processes)} processes)" for p in programs) or "none"
            raise ValueError(f"no process of the command ran {process!r}: it ran {names}")
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    if len(processes) == 1:
        shutil.copyfile(processes[0].path, tmp)
        events = processes[0].events
    else:
        ordered = sorted(processes, key=lambda t: (t.pid, t.image))  # as the processes started, roughly
        pid = ordered[0].pid if ordered else 0
        events = _core.concat_traces([str(t.path) for t in ordered], str(tmp), chosen.name, pid)["events"]
    tmp.replace(output)
    return Selection(output, chosen.name, list(processes), merge and len(processes) > 1, events, programs)
