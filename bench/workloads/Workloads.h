// The allocation-intensive workloads of the layers benchmarks, by name, so the benchmark
// runner, the demo and the standalone `heapkit-workload` program pick the same ones.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "AllocTest.h"
#include "AllocatorPolicy.h"
#include "BoxedSim.h"
#include "Cfrac.h"
#include "Espresso.h"
#include "GcBench.h"
#include "Lindsay.h"

namespace heapkit::workloads {

struct WorkloadInfo {
  std::string_view name;
  std::string_view description;
  unsigned fullScale;   // for `make bench-layers`: a few hundred milliseconds to a second on glibc
  unsigned quickScale;  // for the demo and the tests
};

inline constexpr WorkloadInfo kWorkloads[] = {
    {"cfrac", "big-integer factoring, small short-lived numbers (cfrac-like)", 400, 30},
    {"espresso", "logic minimisation over mid-size sets and hash tables (espresso-like)", 100, 10},
    {"gcbench", "binary trees built and freed around long-lived data (GCBench-like)", 8, 1},
    {"lindsay", "hypercube network simulation, many small objects (lindsay-like)", 500, 50},
    {"boxedsim", "spheres bouncing in a box (boxed-sim-like)", 40, 4},
    {"alloctest", "random replacement of 8 B-16 KiB objects in a 1000-object working set (alloc-test-like)", 100, 5},
};

inline const WorkloadInfo* findWorkload(std::string_view name) {
  for (const WorkloadInfo& info : kWorkloads)
    if (info.name == name) return &info;
  return nullptr;
}

// Runs a workload by name; returns its checksum (the same on every correct allocator).
template <AllocatorPolicy A>
std::uint64_t runWorkload(std::string_view name, A& alloc, unsigned scale) {
  if (name == "cfrac") return runCfrac(alloc, scale);
  if (name == "espresso") return runEspresso(alloc, scale);
  if (name == "gcbench") return runGcBench(alloc, scale);
  if (name == "lindsay") return runLindsay(alloc, scale);
  if (name == "boxedsim") return runBoxedSim(alloc, scale);
  if (name == "alloctest") return runAllocTest(alloc, scale);
  throw WorkloadFailure("unknown workload");
}

}  // namespace heapkit::workloads
