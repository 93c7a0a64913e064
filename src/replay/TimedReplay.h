// heapkit-replay's measurement: a trace decoded into memory, then applied by the one trace
// loop (heapkit/trace/TraceLoop.h, the simulator's too) to an allocator called as a heap
// (the process's malloc family, or a DMM design's heap directly), timed, with the resident
// set before and at the peak, and reported as one line of JSON. `heapkit build` compiles
// the same measurement against an emitted design to verify it (installed with the package
// as heapkit-replay/TimedReplay.h), so the built allocator is measured exactly as
// heapkit-replay measures any other.
#pragma once

#include <sys/mman.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ResidentSet.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/trace/TraceLoop.h"

namespace heapkit::replay {

using trace::Operation;

constexpr std::size_t kPage = 4096;

// The replayer's own arrays bypass malloc: memory they held and freed would otherwise stay
// in the allocator under test, be reused by the replay, and hide part of its footprint.
template <class T>
struct MmapAllocator {
  using value_type = T;
  MmapAllocator() = default;
  template <class U>
  MmapAllocator(const MmapAllocator<U>&) {}
  T* allocate(std::size_t n) {
    void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) { munmap(p, n * sizeof(T)); }
  bool operator==(const MmapAllocator&) const { return true; }
};
template <class T>
using MmapVector = std::vector<T, MmapAllocator<T>>;

inline double seconds(clockid_t clock = CLOCK_MONOTONIC) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One byte written per page, as a program that uses its memory would, so that untouched
// allocations do not hide footprint.
inline void touch(void* object, std::uint64_t size) {
  auto* bytes = static_cast<volatile unsigned char*>(object);
  for (std::uint64_t at = 0; at < size; at += kPage) bytes[at] = 1;
}

// The process's malloc family, called as a heap, so that one loop serves it and a DMM
// design's heap alike.
struct ProcessMalloc {
  void* malloc(std::size_t size) { return std::malloc(size); }
  void* calloc(std::size_t count, std::size_t size) { return std::calloc(count, size); }
  void* realloc(void* object, std::size_t size) { return std::realloc(object, size); }
  int posix_memalign(void** result, std::size_t alignment, std::size_t size) {
    return ::posix_memalign(result, alignment, size);
  }
  void free(void* object) { std::free(object); }
};

// The replay's side of the trace loop: each object's block in a table indexed by id (one
// load per free, nothing else), so that the time measured is the allocator's.
class ReplayObjects {
 public:
  struct Entry {
    void* address = nullptr;
  };

  ReplayObjects(std::uint64_t objects, bool touchMemory) : slots_(objects, nullptr), touchMemory_(touchMemory) {}

  Entry take(std::uint64_t id) {
    void* object = slots_[id];
    slots_[id] = nullptr;
    return {object};
  }
  void keep(std::uint64_t id, const Entry& entry) { slots_[id] = entry.address; }
  void place(std::uint64_t id, void* object, std::uint64_t size) {
    if (touchMemory_) touch(object, size);
    slots_[id] = object;
  }
  void failed(std::uint64_t) { ++failures_; }

  std::uint64_t failures() const { return failures_; }

 private:
  MmapVector<void*> slots_;
  bool touchMemory_;
  std::uint64_t failures_ = 0;
};

// The trace's operations, decoded once (decoding is not timed).
// Where each thread's run of operations begins: a design with a heap per thread
// (SelectedThreadHeaps) is told whose calls follow, on the one replaying thread, as the
// simulator tells it.
struct ThreadRun {
  std::uint64_t first;  // index of its first operation
  std::uint32_t thread;
};

struct ReplayInput {
  MmapVector<Operation> ops;
  MmapVector<ThreadRun> runs;  // in order; one run per change of thread
  std::uint64_t objects = 0;
  std::uint64_t maxLive = 0;  // the trace's own peak of requested bytes
};

// 0, or 1 (unreadable: the message in `error`) or 2 (a bad trace).
inline int loadReplay(const char* path, ReplayInput& input, std::string& error) {
  try {
    trace::MappedFile file(path);
    // First pass: validate and count, so that the operations fit in one exact allocation.
    std::uint64_t count = 0;
    {
      trace::TraceDecoder decoder(file.data(), file.size());
      Operation batch[256];
      MmapVector<std::uint64_t> sizes;
      std::uint64_t live = 0;
      while (std::size_t n = decoder.read(batch, std::size(batch))) {
        count += n;
        for (const Operation& op : std::span(batch, n)) {
          if (op.op() == trace::Op::Free || op.op() == trace::Op::Realloc)
            live -= sizes[op.op() == trace::Op::Free ? op.id() : op.extra];
          if (op.op() != trace::Op::Free) {
            sizes.push_back(op.size);
            live += op.size;
            if (live > input.maxLive) input.maxLive = live;
          }
        }
      }
      if (decoder.failed()) {
        error = std::string(path) + ": " + decoder.error();
        return 2;
      }
      input.objects = decoder.objects();
    }
    input.ops.resize(count);
    trace::TraceDecoder decoder(file.data(), file.size(), false);
    std::uint64_t at = 0;
    std::uint32_t thread = 0;
    while (std::size_t n = decoder.readRun(input.ops.data() + at, count - at, thread)) {
      if (input.runs.empty() || input.runs.back().thread != thread) input.runs.push_back({at, thread});
      at += n;
    }
  } catch (const std::exception& exception) {
    error = exception.what();
    return 1;
  }
  return 0;
}

struct Measurement {
  double elapsed = 0;
  double cpu = 0;  // the replaying thread's CPU time (user and system), which other load disturbs less
  std::uint64_t baseline = 0, peak = 0, end = 0, failures = 0;
  bool peakReset = false;
};

// The trace's operations through the trace loop, timed, with the resident set before and
// at the peak. With `samples` (reserved by the caller), the resident set's growth over the
// baseline is recorded every `sampleEvery` operations: footprint over time (a sampled run
// is not timed).
template <class Allocator>
Measurement measureReplay(Allocator& allocator, const ReplayInput& input, bool touchMemory,
                          MmapVector<std::pair<std::uint64_t, std::uint64_t>>* samples = nullptr,
                          std::uint64_t sampleEvery = 0) {
  ReplayObjects objects(input.objects, touchMemory);  // before the baseline: not the allocator's
  Measurement m;
  m.peakReset = resetPeak();
  m.baseline = residentBytes();
  const Operation* begin = input.ops.data();
  const Operation* end = begin + input.ops.size();
  double start = seconds();
  double cpuStart = seconds(CLOCK_THREAD_CPUTIME_ID);
  if constexpr (requires { allocator.selectThread(0u); }) {
    // Each thread's run on its heap: the trace's threads take turns on this one.
    std::uint64_t done = 0;
    for (std::size_t r = 0; r < input.runs.size(); ++r) {
      const Operation* runEnd = r + 1 < input.runs.size() ? begin + input.runs[r + 1].first : end;
      allocator.selectThread(input.runs[r].thread);
      trace::applyOperations(allocator, objects, begin + input.runs[r].first, runEnd, [&](const Operation&) {
        if (samples == nullptr || ++done % sampleEvery != 0) return;
        std::uint64_t now = residentBytes();
        samples->emplace_back(done, now > m.baseline ? now - m.baseline : 0);
      });
    }
  } else if (samples == nullptr) {
    trace::applyOperations(allocator, objects, begin, end);
  } else {
    std::uint64_t done = 0;
    trace::applyOperations(allocator, objects, begin, end, [&](const Operation&) {
      if (++done % sampleEvery != 0) return;
      std::uint64_t now = residentBytes();
      samples->emplace_back(done, now > m.baseline ? now - m.baseline : 0);
    });
  }
  m.cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpuStart;
  m.elapsed = seconds() - start;
  m.peak = peakResidentBytes();
  m.end = residentBytes();
  m.failures = objects.failures();
  return m;
}

// One line of JSON: the figures heapkit-replay reports; `extra` is appended inside it.
inline void printReplay(const ReplayInput& input, const Measurement& m, bool touchMemory, const std::string& mallocLibrary,
                        const std::string& extra) {
  std::printf(
      "{\"operations\": %zu, \"seconds\": %.9f, \"cpu_seconds\": %.9f, \"ns_per_op\": %.3f, \"baseline_rss_bytes\": %llu, "
      "\"peak_rss_bytes\": %llu, \"footprint_bytes\": %llu, \"end_rss_bytes\": %llu, \"max_live_bytes\": %llu, "
      "\"failed_allocations\": %llu, \"touch\": %s, \"peak_reset\": %s, \"malloc_library\": %s%s}\n",
      input.ops.size(), m.elapsed, m.cpu, input.ops.empty() ? 0.0 : m.elapsed * 1e9 / static_cast<double>(input.ops.size()),
      static_cast<unsigned long long>(m.baseline), static_cast<unsigned long long>(m.peak),
      static_cast<unsigned long long>(m.peak > m.baseline ? m.peak - m.baseline : 0),
      static_cast<unsigned long long>(m.end), static_cast<unsigned long long>(input.maxLive),
      static_cast<unsigned long long>(m.failures), touchMemory ? "true" : "false", m.peakReset ? "true" : "false",
      mallocLibrary.c_str(), extra.c_str());
}

// A design's own footprint, for the JSON line.
template <class Heap>
std::string heldJson(const Heap& heap) {
  std::string out = ", \"heap_peak_bytes_held\": " + std::to_string(heap.peakBytesHeld()) + ", \"heap_end_bytes_held\": " +
                    std::to_string(heap.bytesHeld());
  // The simulator's footprint: resident bytes (held less the pages purged), where counted.
  if constexpr (requires { heap.peakResidentBytes(); })
    out += ", \"heap_peak_resident_bytes\": " + std::to_string(heap.peakResidentBytes());
  return out;
}

}  // namespace heapkit::replay
