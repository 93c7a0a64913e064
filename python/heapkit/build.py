"""From a spec to a running allocator: ``heapkit emit`` and ``heapkit build``.

``emit`` writes the design as a C++ header: the heap-layers type expression of the very
layers the simulator ran, with the spec's values as compile-time constants
(``heapkit::StaticDmmHeap``). ``build`` compiles it, with the package's own headers and
malloc wrapper (nothing else is needed but a C++20 compiler), into

- ``lib<name>.so``: a preload library (``LD_PRELOAD=./libmine.so program``);
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
from typing import Optional

from heapkit import _core
from heapkit._paths import PACKAGE_DIR, program
from heapkit.dmm import Spec, SpecLike, as_spec

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


_PROVIDER = """// The entry points of heapkit's malloc wrapper over the design in {header}, behind one
// lock, as `heapkit build` compiles it into lib{name}.so and lib{name}.a.
#include <new>

#include <heapkit/threads/LockedHeap.h>
#include <heapkit/threads/Locks.h>
#include <heapkit/wrapper/ANSIWrapper.h>
#include "heapkit_entry_points.h"
#include "{header}"

namespace {{
using ProvidedHeap = heapkit::ANSIWrapper<heapkit::LockedHeap<heapkit::SpinLock, {ns}::Dmm<heapkit::RealMemory>>>;
alignas(ProvidedHeap) alignas(64) unsigned char storage[sizeof(ProvidedHeap)];
inline ProvidedHeap& providedHeap() {{ return *std::launder(reinterpret_cast<ProvidedHeap*>(storage)); }}
}}  // namespace

extern "C" {{
void heapkit_ep_init(void) {{ new (storage) ProvidedHeap(); }}
void* heapkit_ep_malloc(size_t size) {{ return providedHeap().malloc(size); }}
void heapkit_ep_free(void* ptr) {{ providedHeap().free(ptr); }}
void* heapkit_ep_memalign(size_t alignment, size_t size) {{ return providedHeap().memalign(alignment, size); }}
size_t heapkit_ep_usable_size(void* ptr) {{ return providedHeap().getSize(ptr); }}
void* heapkit_ep_realloc(void* ptr, size_t size) {{ return providedHeap().realloc(ptr, size); }}
void heapkit_ep_fork_prepare(void) {{ heapkit::forkhooks::prepare(providedHeap()); }}
void heapkit_ep_fork_parent(void) {{ heapkit::forkhooks::parent(providedHeap()); }}
void heapkit_ep_fork_child(void) {{ heapkit::forkhooks::child(providedHeap()); }}
}}

#include "wrapper.cpp"
"""

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


def _compile(args: list[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"compiling {what} failed:\n{' '.join(args)}\n{done.stderr.strip()}")


def build(spec: SpecLike, output: str | Path, *, optimize: str = "-O2", extra_flags: Optional[list[str]] = None) -> BuildResult:
    """Builds ``output`` (``lib<name>.so``) and, beside it, ``lib<name>.a``, ``<name>.cmake``,
    ``<name>.h`` and ``<name>-verify``. Raises BuildError with the compiler's message."""
    spec = as_spec(spec)
    output = Path(output).resolve()
    stem = output.name
    if stem.startswith("lib"):
        stem = stem[3:]
    stem = stem.split(".so")[0] or "design"
    out_dir = output.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    ident = _identifier(stem)
    header = emit(spec, out_dir / f"{stem}.h", ident)
    work = out_dir / f".{stem}-build"
    work.mkdir(exist_ok=True)
    provider = work / "provider.cpp"
    provider.write_text(_PROVIDER.format(header=header.name, name=stem, ns=ident))
    verifier_source = work / "verify.cpp"
    verifier_source.write_text(_VERIFIER.format(header=header.name, name=stem, ns=ident))
    cxx = compiler()
    common = [cxx, "-std=c++20", optimize, "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{INCLUDE_DIR}",
              f"-I{WRAPPER_DIR}", f"-I{out_dir}"] + (extra_flags or [])
    # The wrapper tests whether the provider defined its optional (weak) entry points; when
    # it has, GCC says the test is always true.
    # As cmake/HeapkitAllocator.cmake builds heapkit's own: no exceptions and no C++ runtime
    # loaded into the programs the library runs under.
    library_flags = ["-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fno-builtin",
                     "-ftls-model=initial-exec", "-Wno-address", "-fno-exceptions"]
    no_runtime = ["-static-libstdc++", "-static-libgcc", "-Wl,--exclude-libs,ALL", "-Wl,--as-needed"]
    _compile(common + library_flags + ["-shared", str(provider), "-o", str(output)] + no_runtime, output.name)
    obj = work / "provider.o"
    _compile(common + library_flags + ["-c", str(provider), "-o", str(obj)], f"lib{stem}.a")
    static = out_dir / f"lib{stem}.a"
    static.unlink(missing_ok=True)
    subprocess.run(["ar", "rcs", str(static), str(obj)], check=True)
    shutil.copy(WRAPPER_DIR / "malloc_family.dynlist", out_dir / "malloc_family.dynlist")
    cmake = out_dir / f"{stem}.cmake"
    cmake.write_text(_CMAKE.format(name=stem, ident=ident, source=spec.source or spec.name))
    verifier = out_dir / f"{stem}-verify"
    _compile(common + [str(verifier_source), "-o", str(verifier)], verifier.name)
    return BuildResult(spec, header, output, static, cmake, verifier)


# ---- verification --------------------------------------------------------------------------

@dataclass
class Verification:
    design: str
    predicted_footprint: int  # the simulator's high-water mark of bytes held
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


def _run_json(cmd: list[str], env: dict | None = None) -> dict:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed (status {done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
        data = _run_json([str(result.verifier), trace, "--no-touch"])
        measured = data["heap_peak_bytes_held"]
        compiled.append(data["seconds"])
        configured.append(_run_json([str(program("heapkit-replay")), trace, "--spec", str(spec_file), "--no-touch"])["seconds"])
    preload = {}
    for name in ("glibc", str(result.shared_library)):
        r = replay(trace, name, runs=runs)
        preload["glibc" if name == "glibc" else result.shared_library.name] = {
            "seconds": r.median_seconds, "peak_rss_bytes": int(statistics.median(x.peak_rss_bytes for x in r.runs)),
            "footprint_bytes": r.median_footprint_bytes}
    return Verification(result.spec.name, predicted.peak_footprint, int(measured), statistics.median(compiled),
                        statistics.median(configured), preload)


__all__ = ["BuildError", "BuildResult", "Verification", "build", "compiler", "emit", "verify"]
