#include "Simulate.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>

#include "TraceApplier.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/wrapper/ANSIWrapper.h"

namespace heapkit::sim {

using trace::Event;
using trace::Op;

namespace {
double now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

struct Simulation::State {
  using Heap = ANSIWrapper<DmmHeap<SimulatedMemory>>;

  State(const ParsedSpec& spec, const std::string& path, const SimulationOptions& opts)
      : options(opts), file(path), decoder(file.data(), file.size()), heap(spec.dmm, opts.reserveBytes), tracePath(path) {
    if (decoder.failed()) throw SimulationError(path + ": " + decoder.error());
    if (heap.arena().reservedBytes() == 0)
      throw SimulationError("cannot reserve " + std::to_string(opts.reserveBytes >> 20) + " MiB of address space to simulate in");
  }

  SimulationOptions options;
  trace::MappedFile file;
  trace::TraceDecoder decoder;
  Heap heap;
  std::string tracePath;
  TraceApplier<Heap> applier{heap};
  SimulationResult result;
  // Footprint over time: the highest held figure in each stride of events; when the
  // buffer fills, neighbours merge and the stride doubles.
  std::uint64_t sampleStride = 1;
  std::uint64_t untilSample = 1;
  std::uint64_t sampleMax = 0;
  // Static energy integrates the footprint over operations.
  unsigned __int128 heldByteOperations = 0;
  double seconds = 0;
  bool done = false;
  bool abandoned = false;

  // The trace is read once, front to back: the pages behind the decoder leave the
  // process's resident set, so the simulator's memory does not grow with the trace.
  void dropReadPages() {
    std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(file.data());
    std::uintptr_t end = (begin + decoder.offset()) & ~std::uintptr_t{4095};
    std::uintptr_t from = std::max(droppedUpTo, (begin + 4095) & ~std::uintptr_t{4095});
    if (file.size() == 0 || end <= from) return;
    madvise(reinterpret_cast<void*>(from), end - from, MADV_DONTNEED);
    droppedUpTo = end;
  }
  std::uintptr_t droppedUpTo = 0;

  void apply(const Event& e) {
    if (!applier.apply(e) && heap.arena().exhausted())
      throw SimulationError(tracePath + ": the trace's footprint does not fit the " +
                            std::to_string(heap.arena().reservedBytes() >> 20) +
                            " MiB reserved to simulate it in (raise the reserve)");
    std::size_t held = heap.bytesHeld();
    // The arena's own high-water mark: a realloc may hold both blocks for a moment.
    std::size_t peak = heap.peakBytesHeld();
    if (peak > result.peakFootprintBytes) {
      result.peakFootprintBytes = peak;
      result.liveBytesAtPeak = applier.liveBytes();
      result.usableBytesAtPeak = applier.liveUsableBytes();
    }
    heldByteOperations += held;
    sampleMax = std::max<std::uint64_t>(sampleMax, held);
    if (--untilSample == 0) {
      result.footprintSamples.emplace_back(applier.counts().events, sampleMax);
      sampleMax = 0;
      if (result.footprintSamples.size() >= 2 * options.maxSamples) {
        auto& samples = result.footprintSamples;
        for (std::size_t i = 0; i < samples.size() / 2; ++i)
          samples[i] = {samples[2 * i + 1].first, std::max(samples[2 * i].second, samples[2 * i + 1].second)};
        samples.resize(samples.size() / 2);
        sampleStride *= 2;
      }
      untilSample = sampleStride;
    }
  }
};

Simulation::Simulation(const ParsedSpec& spec, const std::string& tracePath, const SimulationOptions& options) {
  try {
    state_ = std::make_unique<State>(spec, tracePath, options);
  } catch (const std::runtime_error& error) {
    if (dynamic_cast<const SimulationError*>(&error) != nullptr) throw;
    throw SimulationError(error.what());
  }
}

Simulation::~Simulation() = default;

bool Simulation::step(std::uint64_t maxEvents) {
  State& s = *state_;
  if (s.done) return false;
  double start = now();
  Event e;
  std::uint64_t n = 0;
  std::uint64_t budget = s.options.maxStepsPerEvent;
  while (n < maxEvents && s.decoder.next(e)) {
    s.apply(e);
    ++n;
    // Checked often enough that a design walking a long list on every operation stops
    // within milliseconds, and rarely enough to cost nothing; the first 4 Ki events are
    // free (a cold start costs more steps per event).
    if (budget != 0 && (n & 1023) == 0 && s.applier.counts().events > 4096 &&
        s.heap.workCounts().steps > budget * s.applier.counts().events) {
      s.abandoned = true;
      s.done = true;
      s.seconds += now() - start;
      return false;
    }
  }
  s.seconds += now() - start;
  if (s.decoder.failed()) throw SimulationError(s.tracePath + ": " + s.decoder.error());
  s.dropReadPages();
  if (n < maxEvents) s.done = true;
  return !s.done;
}

std::uint64_t Simulation::bytesRead() const { return state_->decoder.offset(); }
std::uint64_t Simulation::traceBytes() const { return state_->decoder.size(); }

SimulationResult Simulation::result() const {
  const State& s = *state_;
  SimulationResult r = s.result;
  r.operations = s.applier.counts();
  r.abandoned = s.abandoned;
  auto& heap = const_cast<State::Heap&>(s.heap);
  r.counts = heap.workCounts();
  r.endFootprintBytes = heap.bytesHeld();
  r.seconds = s.seconds;
  if (s.sampleMax != 0 || r.footprintSamples.empty()) r.footprintSamples.emplace_back(r.operations.events, s.sampleMax);
  const EnergyModel& energy = s.options.energy;
  r.dynamicEnergyNanojoules = static_cast<double>(r.counts.reads + r.counts.writes) * energy.accessNanojoules +
                              static_cast<double>(r.counts.steps) * energy.stepNanojoules;
  r.staticEnergyNanojoules = static_cast<double>(s.heldByteOperations) / 1024.0 * energy.staticNanowattsPerKib *
                             energy.nanosecondsPerOperation * 1e-9;
  for (std::size_t i = 0; i <= heap.count(); ++i) {
    const AllocatorUsage& usage = heap.usage(i);
    r.allocators.push_back({usage.requests, usage.requestedBytes, heap.peakBytesHeldBy(i)});
  }
  return r;
}

SimulationResult simulate(const ParsedSpec& spec, const std::string& tracePath, const SimulationOptions& options) {
  Simulation simulation(spec, tracePath, options);
  while (simulation.step(std::uint64_t{1} << 20)) {
  }
  return simulation.result();
}

}  // namespace heapkit::sim
