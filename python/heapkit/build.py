"""From a spec to a running allocator: ``heapkit emit`` and ``heapkit build``.

``emit`` writes the design as a C++ header: the heap-layers type expression of the very
layers the simulator ran, with the spec's values as compile-time constants
(``heapkit::StaticDmmHeap``). ``build`` compiles it through ``heapkit_add_allocator``
(cmake/HeapkitAllocator.cmake, installed with the package beside its headers and malloc
wrapper: CMake and a C++20 compiler are all it needs), as heapkit's own libraries are
built, into

- ``lib<name>.so``: a preload library (``LD_PRELOAD=./libmine.so program``): the design
  behind one lock; for a design of one page_segregated allocator over every size, the
  same layers as libheapkit.so's thread-aware ScalableHeap (a heap per thread, no lock,
  from mmap instead of the arena) with the design's classes and values; for one allocator
  of another mechanism over every size, that allocator directly over the hardened
  MmapHeap behind the lock, as libheapkit-lea.so and libheapkit-kingsley.so are built;
- ``lib<name>.a`` and ``<name>.cmake``: a static library and a CMake snippet to link the
  allocator into a program;
- ``<name>-verify``: heapkit-replay's measurement over the emitted heap, to check the build.

``verify`` then replays the trace on what was built and reports measured against
predicted: the emitted heap's footprint high-water mark, which must equal the simulated
one to the byte; the compiled design's speed against the same design configured at run
time (``heapkit-replay --spec``); and the preload library's time and resident set
against glibc's in the same run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from heapkit import _core
from heapkit._paths import PACKAGE_DIR, program
from heapkit.dmm import Spec, SpecLike, as_spec

if TYPE_CHECKING:
    from heapkit.replay import ReplayRun

INCLUDE_DIR = PACKAGE_DIR / "include"
WRAPPER_DIR = PACKAGE_DIR / "wrapper"


class BuildError(RuntimeError):
    pass


def _identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit():
        ident = "design_" + ident
    return ident


def emit(spec: SpecLike, output: str | Path, namespace: str | None = None) -> Path:
    """Writes the design's header; its types are in ``namespace`` (default: the file's stem)."""
    spec = as_spec(spec)
    output = Path(output)
    ns = _identifier(namespace or output.stem)
    output.write_text(_core.emit_header(spec.normalized if not spec.name else _named(spec), ns,
                                        spec.source or "a spec"))
    return output


def _named(spec: Spec) -> str:
    data = spec.data
    data["name"] = spec.name
    return json.dumps(data)


def compiler() -> str:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise BuildError("no C++ compiler found (set CXX, or install g++)")


_VERIFIER = """// heapkit-replay's measurement (heapkit-replay/TimedReplay.h: the trace loop the simulator
// uses, timed) over the design in {header}, called directly: `heapkit build` runs it to
// check the built design against the simulator.
#include <cstring>

#include <heapkit-replay/TimedReplay.h>
#include <heapkit/wrapper/ANSIWrapper.h>
#include "{header}"

using namespace heapkit::replay;

int main(int argc, char** argv) {{
  if (argc < 2) {{
    std::fprintf(stderr, "usage: %s TRACE [--no-touch]\\n", argv[0]);
    return 1;
  }}
  bool touchMemory = !(argc > 2 && std::strcmp(argv[2], "--no-touch") == 0);
  ReplayInput input;
  std::string error;
  if (int status = loadReplay(argv[1], input, error); status != 0) {{
    std::fprintf(stderr, "%s: %s\\n", argv[0], error.c_str());
    return status;
  }}
  heapkit::ANSIWrapper<{ns}::Dmm<heapkit::RealMemory>> heap;
  Measurement measured = measureReplay(heap, input, touchMemory);
  printReplay(input, measured, touchMemory, "\\"{name}-verify\\"", heldJson(heap));
  return 0;
}}
"""

# The build: heapkit_add_allocator() (cmake/HeapkitAllocator.cmake, installed with the
# package) makes the preload library exactly as it makes heapkit's own (the malloc wrapper,
# HardenedHeap's checks on free, no C++ runtime loaded into the program); its object
# library also makes the static one; the verifier is the replayer's loop over the design.
_PROJECT = """cmake_minimum_required(VERSION 3.20)
project(heapkit_design_{ident} LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)  # -std=c++20, as heapkit's own libraries
add_library(heapkit INTERFACE)
add_library(heapkit::heapkit ALIAS heapkit)
target_include_directories(heapkit INTERFACE "{include}")
include("{package}/HeapkitAllocator.cmake")
# {shipped_comment}
heapkit_add_allocator({name} HEAP "{shipped_heap}"
                      INCLUDES "heapkit/threads/LockedHeap.h" "{header}")
target_include_directories({name}_objects PRIVATE "{design_dir}")
target_compile_options({name}_objects PRIVATE -Wall -Wextra)
# The same objects as a static library: lib{name}.a.
add_library({name}_static STATIC $<TARGET_OBJECTS:{name}_objects>)
set_target_properties({name}_static PROPERTIES OUTPUT_NAME {name})
# The replayer's loop over the emitted heap: {name}-verify.
add_executable({name}-verify verify.cpp)
target_link_libraries({name}-verify PRIVATE heapkit::heapkit)
target_include_directories({name}-verify PRIVATE "{design_dir}")
target_compile_options({name}-verify PRIVATE -Wall -Wextra)
"""

_CMAKE = """# Link the {name} allocator (built by `heapkit build` from {source}) into a program:
#   include(path/to/{name}.cmake)
#   heapkit_link_{ident}(my_program)
# The program's malloc family (and operator new/delete) then comes from lib{name}.a, and is
# exported so that libraries the program loads use it too.
find_package(Threads REQUIRED)
set(HEAPKIT_{ident}_DIR "${{CMAKE_CURRENT_LIST_DIR}}")
add_library({ident}_allocator STATIC IMPORTED)
# It needs no C++ runtime (operator new and delete live in it too, and find the program's
# runtime only to throw std::bad_alloc).
set_target_properties({ident}_allocator PROPERTIES
  IMPORTED_LOCATION "${{HEAPKIT_{ident}_DIR}}/lib{name}.a"
  INTERFACE_LINK_LIBRARIES "Threads::Threads")
function(heapkit_link_{ident} target)
  target_link_libraries(${{target}} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,{ident}_allocator>")
  target_link_options(${{target}} PRIVATE "LINKER:--dynamic-list=${{HEAPKIT_{ident}_DIR}}/malloc_family.dynlist")
endfunction()
"""


@dataclass
class BuildResult:
    spec: Spec
    header: Path
    shared_library: Path
    static_library: Path
    cmake_snippet: Path
    verifier: Path


def _run(args: list[str], what: str, cwd: Path) -> None:
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()
        raise BuildError(f"{what}:\n{' '.join(args)}\n{output[-4000:]}")


def _cmake() -> str:
    found = shutil.which("cmake")
    if found is None:
        raise BuildError("cmake is needed to build a design (heapkit_add_allocator): install cmake")
    return found


def thread_aware(spec: SpecLike) -> bool:
    """One page_segregated allocator over every size: built as libheapkit.so's thread-aware
    heap (ScalableHeap: a heap per thread, no lock) with the design's classes and values."""
    data = as_spec(spec).data
    allocators = data["allocators"]
    return ("short_lived" not in data and len(allocators) == 1 and allocators[0]["mechanism"] == "page_segregated"
            and allocators[0]["range"] == [0, None])


def direct(spec: SpecLike) -> bool:
    """One allocator of another mechanism over every size (LEA, ALEA, KNG, S10...): every
    request is its, so it is built as heapkit's single-heap libraries are, the allocator
    directly over the hardened MmapHeap (the header's ``Direct<>``), without the arena and
    the routing."""
    data = as_spec(spec).data
    allocators = data["allocators"]
    return ("short_lived" not in data and len(allocators) == 1 and allocators[0]["range"] == [0, None]
            and not thread_aware(spec))


def shipped_heap(spec: SpecLike, ns: str) -> str:
    """The heap type lib<name>.so runs: the thread-aware ScalableHeap for a design of one
    page_segregated allocator; the allocator directly over the hardened MmapHeap for a design
    of one allocator of another mechanism over every size (so ALEA's is libheapkit-lea.so's
    heap); else the design over its arena. Those two behind one lock, taken once the process
    has a second thread (UnlessSingleThreaded, as glibc's malloc does)."""
    if thread_aware(spec):
        return f"{ns}::ThreadAware<heapkit::Hardened<heapkit::MmapHeap>>"
    lock = "heapkit::UnlessSingleThreaded<heapkit::SpinLock>"
    if direct(spec):
        return f"heapkit::LockedHeap<{lock}, {ns}::Direct<heapkit::Hardened<heapkit::MmapHeap>>>"
    return f"heapkit::LockedHeap<{lock}, {ns}::Dmm<heapkit::RealMemory>>"


def _shipped_comment(spec: Spec, stem: str) -> str:
    if thread_aware(spec):
        return f"The design as libheapkit.so's thread-aware heap (a heap per thread, no lock, over mmap), as a drop-in malloc: lib{stem}.so."
    what = "Its allocator directly over mmap, as heapkit's single-heap libraries" if direct(spec) else "The design"
    return f"{what}, behind one lock (taken once the process has a second thread), as a drop-in malloc: lib{stem}.so."


def build(spec: SpecLike, output: str | Path, *, build_type: str = "Release") -> BuildResult:
    """Builds ``output`` (``lib<name>.so``) and, beside it, ``lib<name>.a``, ``<name>.cmake``,
    ``<name>.h`` and ``<name>-verify``, through ``heapkit_add_allocator`` (CMake and a C++20
    compiler). Raises BuildError with the compiler's message."""
    spec = as_spec(spec)
    output = Path(output).resolve()
    stem = output.name
    if stem.startswith("lib"):
        stem = stem[3:]
    stem = stem.split(".so")[0] or "design"
    stem = re.sub(r"[^A-Za-z0-9_.+-]", "_", stem)
    out_dir = output.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    ident = _identifier(stem)
    header = emit(spec, out_dir / f"{stem}.h", ident)
    work = out_dir / f".{stem}-build"
    work.mkdir(exist_ok=True)
    (work / "verify.cpp").write_text(_VERIFIER.format(header=header.name, name=stem, ns=ident))
    (work / "CMakeLists.txt").write_text(_PROJECT.format(
        ident=ident, name=stem, ns=ident, header=header.name, include=_cmake_path(INCLUDE_DIR),
        shipped_heap=shipped_heap(spec, ident),
        shipped_comment=_shipped_comment(spec, stem),
        package=_cmake_path(PACKAGE_DIR), design_dir=_cmake_path(out_dir)))
    cmake = _cmake()
    configure = [cmake, "-S", str(work), "-B", str(work / "build"), f"-DCMAKE_BUILD_TYPE={build_type}",
                 f"-DCMAKE_CXX_COMPILER={shutil.which(compiler()) or compiler()}"]
    if shutil.which("ninja") and not (work / "build" / "Makefile").exists():
        configure += ["-G", "Ninja"]
    _run(configure, f"building {output.name} failed (configuring with cmake)", work)
    _run([cmake, "--build", str(work / "build"), "-j", str(min(os.cpu_count() or 1, 3))],
         f"building {output.name} failed (compiling)", work)
    built = work / "build"
    shutil.copy2(built / f"lib{stem}.so", output)
    static = out_dir / f"lib{stem}.a"
    shutil.copy2(built / f"lib{stem}.a", static)
    verifier = out_dir / f"{stem}-verify"
    shutil.copy2(built / f"{stem}-verify", verifier)
    shutil.copy(WRAPPER_DIR / "malloc_family.dynlist", out_dir / "malloc_family.dynlist")
    cmake_snippet = out_dir / f"{stem}.cmake"
    cmake_snippet.write_text(_CMAKE.format(name=stem, ident=ident, source=spec.source or spec.name))
    return BuildResult(spec, header, output, static, cmake_snippet, verifier)


def _cmake_path(path: Path) -> str:
    return str(path).replace("\\", "/").replace('"', '\\"')


# ---- verification --------------------------------------------------------------------------

@dataclass
class Verification:
    design: str
    predicted_footprint: int  # the simulator's high-water mark of the footprint (resident bytes)
    measured_footprint: int  # the built (compile-time) heap's, replaying the same trace
    compiled_seconds: float  # median replay time of the emitted design (no data written)
    configured_seconds: float  # the same design configured at run time (heapkit-replay --spec)
    preload: dict = field(default_factory=dict)  # allocator -> {"seconds", "peak_rss_bytes"}: lib and glibc

    @property
    def footprint_matches(self) -> bool:
        return self.predicted_footprint == self.measured_footprint

    @property
    def speedup_over_configured(self) -> float:
        return self.configured_seconds / self.compiled_seconds if self.compiled_seconds else 0.0


def _run_replayer(cmd: list[str]) -> "ReplayRun":
    """The verifier or the replayer, run once: its JSON line read as the replayer's."""
    from heapkit.replay import parse_replay_output

    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed (status {done.returncode}): {done.stderr.strip()}")
    return parse_replay_output(done.stdout)


def built_footprint(result: BuildResult, trace: str | Path) -> int:
    """The built (compile-time) heap's footprint high-water mark (resident bytes), replaying ``trace``
    once with its verifier: what the simulator predicts to the byte."""
    return int(_run_replayer([str(result.verifier), str(trace), "--no-touch"]).heap_peak_bytes_held)


def verify(result: BuildResult, trace: str | Path, runs: int = 3) -> Verification:
    """Replays ``trace`` on the build and on the run-time-configured design, and predicts it."""
    from heapkit.replay import replay
    from heapkit.simulator import simulate

    trace = str(trace)
    predicted = simulate(trace, result.spec)[0]
    spec_file = result.header.with_suffix(".json")
    spec_file.write_text(result.spec.to_json())
    compiled, configured = [], []
    measured = None
    for _ in range(runs):  # interleaved, so drift in the machine's load falls on both
        run = _run_replayer([str(result.verifier), trace, "--no-touch"])
        measured = run.heap_peak_bytes_held
        compiled.append(run.seconds)  # the replay loop's own time
        configured.append(_run_replayer([str(program("heapkit-replay")), trace, "--spec", str(spec_file),
                                         "--no-touch"]).seconds)
    preload = {}
    for name in ("glibc", str(result.shared_library)):
        r = replay(trace, name, runs=runs)
        preload["glibc" if name == "glibc" else result.shared_library.name] = {
            "seconds": r.median_seconds, "peak_rss_bytes": int(statistics.median(x.peak_rss_bytes for x in r.runs)),
            "footprint_bytes": r.median_footprint_bytes}
    return Verification(result.spec.name, predicted.peak_footprint, int(measured), statistics.median(compiled),
                        statistics.median(configured), preload)


__all__ = ["BuildError", "BuildResult", "Verification", "build", "built_footprint", "compiler", "direct", "emit",
           "shipped_heap", "thread_aware", "verify"]
