#include "Simulate.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>

#include "SimulationLoop.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/wrapper/ANSIWrapper.h"

namespace heapkit::sim {

namespace {
double now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

// On a page of its own: the memory model numbers pages outside the arena (the heap's own
// fields among them) by first sight, which gives the same counts in every run only when
// the fields lie at the same offsets within their pages (core/CacheModel.h).
struct alignas(4096) Simulation::State {
  using Heap = ANSIWrapper<DmmHeap<SimulatedMemory>>;

  State(const ParsedSpec& spec, const std::string& path, const SimulationOptions& opts)
      : options(opts),
        file(path),
        decoder(file.data(), file.size(), /*checkLiveness=*/false),
        heap(spec.dmm, opts.reserveBytes),
        tracePath(path),
        cacheModel(makeCacheModel(heap, opts)),
        loop(heap, options.maxSamples,
             ProgramTouches(cacheModel.get(), opts.touchObjects, &programCounts, &heap, clearedByCalloc)) {
    if (decoder.failed()) throw SimulationError(path + ": " + decoder.error());
    if (heap.arena().reservedBytes() == 0)
      throw SimulationError("cannot reserve " + std::to_string(opts.reserveBytes >> 20) + " MiB of address space to simulate in");
    heap.workCounts().cacheModel = cacheModel.get();
  }

  static std::uint64_t clearedByCalloc(void* heap, void* object, std::uint64_t bytes) {
    return static_cast<Heap*>(heap)->bytesToClear(object, bytes);
  }

  // The heap outlives the model (it was made first): its teardown must not report to it.
  ~State() { heap.workCounts().cacheModel = nullptr; }

  static std::unique_ptr<CacheModel> makeCacheModel(Heap& heap, const SimulationOptions& opts) {
    if (!opts.cacheModel) return nullptr;
    auto model = std::make_unique<CacheModel>(heap.arena().base(), heap.arena().reservedBytes(), opts.cacheGeometry);
    if (model->failed()) throw SimulationError("cannot map the cache model's page bitmap");
    return model;
  }

  SimulationOptions options;
  trace::MappedFile file;
  // Without liveness bits: the loop's table of live objects knows which are live, and a
  // free of any other is found there (loop.applier().untracked()).
  trace::TraceDecoder decoder;
  Heap heap;
  std::string tracePath;
  ProgramTouchCounts programCounts;
  std::unique_ptr<CacheModel> cacheModel;
  SimulationLoop<Heap, ProgramTouches> loop;
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

  // After each batch: a design that ran out of the reserved range stops the simulation
  // (its failures would be the reserve's, not the design's); one that needs more than
  // maxStepsPerEvent steps per operation is abandoned. The first 4 Ki events are free (a
  // cold start costs more steps per event).
  bool stopAfterBatch() {
    const TraceCounts counts = loop.applier().counts();
    if (counts.failedRequests != 0 && heap.arena().exhausted())
      throw SimulationError(tracePath + ": the trace's footprint does not fit the " +
                            std::to_string(heap.arena().reservedBytes() >> 20) +
                            " MiB reserved to simulate it in (raise the reserve)");
    std::uint64_t budget = options.maxStepsPerEvent;
    if (budget != 0 && counts.events > 4096 && heap.workCounts().steps > budget * counts.events) {
      abandoned = true;
      return true;
    }
    return false;
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
  std::uint64_t n = s.loop.run(s.decoder, maxEvents, [&s] { return s.stopAfterBatch(); });
  s.seconds += now() - start;
  if (s.decoder.failed()) throw SimulationError(s.tracePath + ": " + s.decoder.error());
  if (s.loop.applier().untracked() != 0) {
    std::string error = trace::firstError(s.file.data(), s.file.size());
    throw SimulationError(s.tracePath + ": " + (error.empty() ? "a free of an object that is not live" : error));
  }
  s.dropReadPages();
  if (n < maxEvents || s.abandoned) s.done = true;
  return !s.done;
}

std::uint64_t Simulation::bytesRead() const { return state_->decoder.offset(); }
std::uint64_t Simulation::traceBytes() const { return state_->decoder.size(); }

SimulationResult Simulation::result() const {
  const State& s = *state_;
  SimulationResult r;
  FootprintFigures footprint = s.loop.figures();
  r.operations = s.loop.applier().counts();
  r.peakFootprintBytes = footprint.peakFootprintBytes;
  r.liveBytesAtPeak = footprint.liveBytesAtPeak;
  r.usableBytesAtPeak = footprint.usableBytesAtPeak;
  r.footprintSamples = std::move(footprint.samples);
  r.abandoned = s.abandoned;
  auto& heap = const_cast<State::Heap&>(s.heap);
  r.counts = heap.workCounts();
  r.counts.cacheModel = nullptr;  // the model is the simulation's, which the result outlives
  if (s.cacheModel != nullptr) {
    r.cacheModelled = true;
    r.memory = s.cacheModel->counts();
    r.program = s.programCounts;
  }
  r.endFootprintBytes = footprintOf(heap);
  r.peakBytesHeld = heap.peakBytesHeld();
  r.seconds = s.seconds;
  const EnergyModel& energy = s.options.energy;
  r.dynamicEnergyNanojoules = static_cast<double>(r.counts.reads + r.counts.writes) * energy.accessNanojoules +
                              static_cast<double>(r.counts.steps) * energy.stepNanojoules;
  r.staticEnergyNanojoules = static_cast<double>(footprint.heldByteOperations) / 1024.0 * energy.staticNanowattsPerKib *
                             energy.nanosecondsPerOperation * 1e-9;
  // The allocators, the OS fallback, then the short-lived area if the design has one.
  for (std::size_t i = 0; i <= heap.count() + (heap.hasShortLived() ? 1 : 0); ++i) {
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
