// The DMM simulator: a trace's operations, in recorded order, against a design running
// over simulated memory (DmmHeap<SimulatedMemory> behind the same ANSIWrapper as the
// real allocator), streamed from the file; and the metrics of docs/simulator.md.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ProgramTouches.h"
#include "Spec.h"
#include "TraceApplier.h"
#include "heapkit/core/CacheModel.h"
#include "heapkit/core/Counting.h"

namespace heapkit::sim {

struct SimulationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Energy = accesses x accessNanojoules + steps x stepNanojoules + static power over the
// footprint, with each operation standing for nanosecondsPerOperation of time. Defaults
// and their sources: docs/simulator.md.
struct EnergyModel {
  double accessNanojoules = 1.3;         // one 64-bit DRAM access (Horowitz, ISSCC 2014)
  double stepNanojoules = 0.07;          // one instruction's overhead (ibid.)
  double staticNanowattsPerKib = 61.0;   // DRAM background power, ~64 mW per GiB
  double nanosecondsPerOperation = 50.0;
};

struct SimulationOptions {
  std::size_t reserveBytes = std::size_t{64} << 30;
  std::size_t maxSamples = 512;  // footprint-over-time points kept
  // A design that needs more than this many steps per operation on average (a long list
  // walked on every free, say) is abandoned rather than simulated to the end: the search
  // scores it as infeasible. 0: no limit.
  std::uint64_t maxStepsPerEvent = 0;
  EnergyModel energy;
  // Follow the allocator's metadata accesses and the program's touches through a model of
  // the caches, the TLB and the pages first touched (docs/simulator.md, "Memory model"):
  // the figures the time model needs, at some cost in speed.
  bool cacheModel = true;
  // The program writes one byte per page of each object it gets, as heapkit-replay does
  // (false: as heapkit-replay --no-touch).
  bool touchObjects = true;
  CacheGeometry cacheGeometry;
};

struct AllocatorFigures {
  std::uint64_t requests = 0;
  std::uint64_t requestedBytes = 0;
  std::size_t peakBytesHeld = 0;
};

struct SimulationResult {
  TraceCounts operations;  // the trace's operations, failed requests, its own peak of live bytes
  WorkCounts counts;
  bool cacheModelled = false;  // the two below were counted (SimulationOptions::cacheModel)
  CacheModelCounts memory;
  ProgramTouchCounts program;
  // High-water mark of the footprint: bytes held from the OS less the pages purged (given
  // back while their blocks are kept: only page_segregated's segments purge), which is
  // what the process's resident set counts; the same as bytes held for other designs.
  std::size_t peakFootprintBytes = 0;
  std::size_t endFootprintBytes = 0;
  std::size_t peakBytesHeld = 0;  // high-water mark of bytes held (address space taken), purged pages included
  std::uint64_t liveBytesAtPeak = 0;    // requested bytes live when the footprint peaked
  std::uint64_t usableBytesAtPeak = 0;  // what the allocator set aside for them
  // (event index, the most bytes held since the previous point)
  std::vector<std::pair<std::uint64_t, std::uint64_t>> footprintSamples;
  double dynamicEnergyNanojoules = 0;
  double staticEnergyNanojoules = 0;
  std::vector<AllocatorFigures> allocators;  // the spec's allocators, the OS fallback, the short-lived area (if any)
  double seconds = 0;
  bool abandoned = false;  // stopped for exceeding maxStepsPerEvent: the figures cover part of the trace
};

class Simulation {
 public:
  Simulation(const ParsedSpec& spec, const std::string& tracePath, const SimulationOptions& options = {});
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // Runs up to maxEvents more operations; false once the trace is done. Throws
  // SimulationError on a corrupt trace or when the reserved range is too small.
  bool step(std::uint64_t maxEvents);
  std::uint64_t bytesRead() const;
  std::uint64_t traceBytes() const;
  SimulationResult result() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs a whole trace.
SimulationResult simulate(const ParsedSpec& spec, const std::string& tracePath, const SimulationOptions& options = {});

}  // namespace heapkit::sim
