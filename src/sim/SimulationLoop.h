// The simulator's streaming loop over any heap that counts bytes held: a trace decoded a
// batch at a time (the decoder's state stays in registers for a batch, the batch in L1),
// each batch applied by the one trace loop (heapkit/trace/TraceLoop.h), and after every
// operation the footprint the metrics need (docs/simulator.md): the high-water mark and
// the live bytes at it, footprint over time, and held bytes integrated over operations.
// The footprint is what a process's resident set would count: the heap's resident bytes
// (bytes held less the pages a layer purged) where the heap counts them, else bytes held.
// Simulation (Simulate.cpp) runs it over a design in simulated memory; heapkit-loop-speed
// (bench/sim) over a trivial heap, to measure what the loop itself costs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "TraceApplier.h"
#include "heapkit/trace/Reader.h"

namespace heapkit::sim {

// The footprint of a heap now and at its high-water mark: resident bytes where it counts
// them (a heap that purges pages holds more than is resident), bytes held otherwise.
template <class Heap>
std::size_t footprintOf(const Heap& heap) {
  if constexpr (requires { heap.residentBytes(); }) return heap.residentBytes();
  else return heap.bytesHeld();
}
template <class Heap>
std::size_t peakFootprintOf(const Heap& heap) {
  if constexpr (requires { heap.peakResidentBytes(); }) return heap.peakResidentBytes();
  else return heap.peakBytesHeld();
}

struct FootprintFigures {
  std::size_t peakFootprintBytes = 0;   // the heap's own high-water mark of its footprint
  std::uint64_t liveBytesAtPeak = 0;    // requested bytes live when it was reached
  std::uint64_t usableBytesAtPeak = 0;  // what the allocator set aside for them
  // (event index, the most bytes held after any operation since the previous point)
  std::vector<std::pair<std::uint64_t, std::uint64_t>> samples;
  unsigned __int128 heldByteOperations = 0;  // bytes held after each operation, summed
};

template <class Heap, class Data = NoData>
class SimulationLoop {
 public:
  static constexpr std::size_t kBatch = 256;  // 6 KiB of operations

  SimulationLoop(Heap& heap, std::size_t maxSamples, Data data = {})
      : heap_(heap), applier_(heap, data), maxSamples_(maxSamples), perThread_(perThreadHeaps(heap)) {}

  // Applies up to maxEvents operations from the decoder, calling stop() after each batch
  // (true ends the run early). Returns the number applied; fewer than maxEvents at the end
  // of the trace, at a decoding error (the decoder has it), at a free of an object that is
  // not live (applier().untracked(); a decoder without liveness checks lets it through)
  // or when stop() said so.
  template <class Stop>
  std::uint64_t run(trace::TraceDecoder& decoder, std::uint64_t maxEvents, Stop&& stop) {
    std::uint64_t done = 0;
    while (done < maxEvents) {
      std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>({kBatch, maxEvents - done, untilSample_}));
      std::size_t got;
      if (perThread_) {
        // A design with a heap per thread: a batch is a run of one thread's operations.
        std::uint32_t thread = 0;
        got = decoder.readRun(batch_, want, thread);
        if constexpr (requires { heap_.selectThread(thread); }) heap_.selectThread(thread);
      } else {
        got = decoder.read(batch_, want);
      }
      if (got == 0) break;
      applyBatch(got);
      done += got;
      // Fewer than asked: the end, an error, or (a run) another thread's turn.
      if ((got < want && (decoder.finished() || decoder.failed())) || applier_.untracked() != 0 || stop()) break;
    }
    return done;
  }

  const TraceApplier<Heap, Data>& applier() const { return applier_; }

  // The figures so far; the last footprint point covers the operations since the one before.
  FootprintFigures figures() const {
    FootprintFigures f = figures_;
    if (sampleMax_ != 0 || f.samples.empty()) f.samples.emplace_back(applier_.counts().events, sampleMax_);
    return f;
  }

 private:
  // A batch never crosses a footprint point, so the point is taken after the batch.
  // Bytes held change only when the heap gets or returns memory, so after each operation
  // the loop only compares; runs of operations that held the same are summed and
  // maximised when they end.
  [[gnu::noinline]] void applyBatch(std::size_t count) {
    const trace::Operation* const end = batch_ + count;
    runStart_ = batch_;
    for (const trace::Operation* operation = batch_; operation != end; ++operation) {
      applier_.apply(*operation);
      std::size_t held = footprintOf(heap_);
      // The heap's own high-water mark: a realloc may hold both blocks for a moment.
      std::size_t peak = peakFootprintOf(heap_);
      if (held != held_ || peak != figures_.peakFootprintBytes) [[unlikely]] heldChanged(operation, held, peak);
    }
    endRun(end);
    untilSample_ -= count;
    if (untilSample_ == 0) takeSample();
  }

  // The run of operations [runStart_, at) held held_.
  void endRun(const trace::Operation* at) {
    if (at == runStart_) return;
    figures_.heldByteOperations += static_cast<unsigned __int128>(held_) * static_cast<std::uint64_t>(at - runStart_);
    sampleMax_ = std::max<std::uint64_t>(sampleMax_, held_);
    runStart_ = at;
  }

  [[gnu::noinline]] void heldChanged(const trace::Operation* at, std::size_t held, std::size_t peak) {
    endRun(at);
    held_ = held;
    if (peak != figures_.peakFootprintBytes) notePeak(peak);
  }

  void notePeak(std::size_t peak) {
    figures_.peakFootprintBytes = peak;
    figures_.liveBytesAtPeak = applier_.liveBytes();
    figures_.usableBytesAtPeak = applier_.liveUsableBytes();
  }

  // Footprint over time: the highest held figure in each stride of events; when the
  // buffer fills, neighbours merge and the stride doubles.
  void takeSample() {
    auto& samples = figures_.samples;
    samples.emplace_back(applier_.counts().events, sampleMax_);
    sampleMax_ = 0;
    if (samples.size() >= 2 * maxSamples_) {
      for (std::size_t i = 0; i < samples.size() / 2; ++i)
        samples[i] = {samples[2 * i + 1].first, std::max(samples[2 * i].second, samples[2 * i + 1].second)};
      samples.resize(samples.size() / 2);
      sampleStride_ *= 2;
    }
    untilSample_ = sampleStride_;
  }

  static bool perThreadHeaps(Heap& heap) {
    if constexpr (requires { heap.perThreadHeaps(); }) return heap.perThreadHeaps();
    else return false;
  }

  Heap& heap_;
  TraceApplier<Heap, Data> applier_;
  std::size_t maxSamples_;
  bool perThread_;
  FootprintFigures figures_;
  std::uint64_t sampleStride_ = 1;
  std::uint64_t untilSample_ = 1;
  std::uint64_t sampleMax_ = 0;
  std::size_t held_ = 0;                        // bytes held after the latest operation
  const trace::Operation* runStart_ = nullptr;  // the first operation (in batch_) that held held_
  trace::Operation batch_[kBatch];
};

}  // namespace heapkit::sim
