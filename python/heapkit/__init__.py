"""heapkit: the DMM workbench.

Record a program's allocations once, inspect them, replay them on any allocator, and
simulate any memory manager design on them::

    import heapkit
    result = heapkit.record(["./my-program", "arg"], "my-program.hkt")
    profile = heapkit.stats("my-program.hkt")
    print(profile.max_live_bytes, profile.total_to_max_ratio)
    timings = heapkit.replay("my-program.hkt", "jemalloc", runs=5)
    designs = heapkit.simulate("my-program.hkt", ["KNG", "LEA", "my-design.json"])

Every function here is what the ``heapkit`` command runs; the command only parses
arguments and draws tables and progress bars.
"""

from heapkit._core import FORMAT_VERSION, TraceError
from heapkit.convert import LOG_FORMATS, detect_format, export_log, import_log, is_trace
from heapkit.dmm import PRESETS, Spec, SpecError, load_spec, parse_spec, preset
from heapkit.record import RecordResult, RecordedTrace, record
from heapkit.replay import ALLOCATORS, ReplayResult, ReplayRun, replay, resolve_allocator
from heapkit.simulator import SimulationError, SimulationMetrics, normalized_to, simulate
from heapkit.stats import ThreadProfile, TraceStats, stats
from heapkit import timemodel
from heapkit.timemodel import TimeModel
from heapkit.trace import Header, events, read_header, trace_prefix

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "TimeModel",
    "timemodel",
    "SimulationError",
    "SimulationMetrics",
    "Spec",
    "SpecError",
    "load_spec",
    "normalized_to",
    "parse_spec",
    "preset",
    "simulate",
    "ALLOCATORS",
    "FORMAT_VERSION",
    "Header",
    "LOG_FORMATS",
    "RecordResult",
    "RecordedTrace",
    "ReplayResult",
    "ReplayRun",
    "ThreadProfile",
    "TraceError",
    "TraceStats",
    "detect_format",
    "events",
    "export_log",
    "import_log",
    "is_trace",
    "read_header",
    "record",
    "replay",
    "resolve_allocator",
    "stats",
    "trace_prefix",
]
