// The replay loop of heapkit-replay, as a header: a trace decoded into memory, then its
// operations performed, timed, against an allocator called as a heap (the process's
// malloc family, or a DMM design's heap directly), with the resident set measured.
// `heapkit build` compiles the same loop against an emitted design to verify it, so the
// built allocator is measured exactly as heapkit-replay measures any other.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "heapkit/trace/Reader.h"

namespace heapkit::trace::replay {


struct ReplayOp {
  std::uint64_t idKind;  // object id << 8 | Op
  std::uint64_t size;
  std::uint64_t extra;   // realloc: the old object; aligned: the alignment
};

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

// The resident set, read with system calls only: no stdio buffer, so sampling it during
// a replay allocates nothing from the allocator under test.
inline std::uint64_t residentBytes() {
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128];
  ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  unsigned long pages = 0, resident = 0;
  if (std::sscanf(text, "%lu %lu", &pages, &resident) != 2) return 0;
  return std::uint64_t{resident} * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// The peak resident set (VmHWM), which resetPeak() sets back to the current one so that
// decoding the trace does not count.
inline std::uint64_t peakResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) found = true;
  if (f != nullptr) std::fclose(f);
  if (found) return kib * 1024;
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

inline bool resetPeak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

inline double seconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

inline void touch(void* object, std::uint64_t size) {
  auto* bytes = static_cast<volatile unsigned char*>(object);
  for (std::uint64_t at = 0; at < size; at += kPage) bytes[at] = 1;
}


// The process's malloc family, called as a heap, so one replay loop serves it and a DMM
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

struct Measurement {
  double elapsed = 0;
  std::uint64_t baseline = 0, peak = 0, end = 0, failures = 0;
  bool peakReset = false;
};

// The trace's operations with the same calls and arguments the simulator makes
// (src/sim/Simulate.cpp), timed, with the resident set before and at the peak.
// With `samples` (reserved by the caller), the resident set's growth over the baseline is
// recorded every `sampleEvery` operations: footprint over time (a sampled run is not timed).
template <class Allocator>
Measurement measureReplay(Allocator& allocator, const MmapVector<ReplayOp>& ops, MmapVector<void*>& slots,
                          bool touchMemory, MmapVector<std::pair<std::uint64_t, std::uint64_t>>* samples = nullptr,
                          std::uint64_t sampleEvery = 0) {
  Measurement m;
  m.peakReset = resetPeak();
  m.baseline = residentBytes();
  double start = seconds();
  std::uint64_t done = 0;
  for (const ReplayOp& op : ops) {
    if (samples != nullptr && ++done % sampleEvery == 0) {
      std::uint64_t now = residentBytes();
      samples->emplace_back(done, now > m.baseline ? now - m.baseline : 0);
    }
    std::uint64_t id = op.idKind >> 8;
    void* object;
    switch (static_cast<Op>(op.idKind & 0xff)) {
      case Op::Malloc: object = allocator.malloc(op.size); break;
      case Op::Calloc: object = allocator.calloc(1, op.size); break;
      case Op::Realloc:
        object = allocator.realloc(slots[op.extra], op.size);
        if (object != nullptr || op.size == 0) slots[op.extra] = nullptr;
        break;
      case Op::Aligned: {
        object = nullptr;
        if (allocator.posix_memalign(&object, op.extra < sizeof(void*) ? sizeof(void*) : op.extra, op.size) != 0)
          object = nullptr;
        break;
      }
      default:  // Free
        allocator.free(slots[id]);
        slots[id] = nullptr;
        continue;
    }
    if (object == nullptr) {
      ++m.failures;
      continue;
    }
    if (touchMemory) touch(object, op.size);
    slots[id] = object;
  }
  m.elapsed = seconds() - start;
  m.peak = peakResidentBytes();
  m.end = residentBytes();
  return m;
}

// The trace's operations, decoded once (decoding is not timed), and the table of objects.
struct ReplayInput {
  MmapVector<ReplayOp> ops;
  std::uint64_t objects = 0;
  std::uint64_t maxLive = 0;  // the trace's own peak of requested bytes
};

// 0, or 1 (unreadable: the message in `error`) or 2 (a bad trace).
inline int loadReplay(const char* path, ReplayInput& input, std::string& error) {
  try {
    MappedFile file(path);
    // First pass: validate and count, so the operations fit in one exact allocation.
    std::uint64_t count = 0;
    {
      TraceDecoder decoder(file.data(), file.size());
      Event e;
      MmapVector<std::uint64_t> sizes;
      std::uint64_t live = 0;
      while (decoder.next(e)) {
        ++count;
        if (e.op == Op::Free || e.op == Op::Realloc) live -= sizes[e.op == Op::Free ? e.id : e.oldId];
        if (e.op != Op::Free) {
          sizes.push_back(e.size);
          live += e.size;
          if (live > input.maxLive) input.maxLive = live;
        }
      }
      if (decoder.failed()) {
        error = std::string(path) + ": " + decoder.error();
        return 2;
      }
      input.objects = decoder.objects();
    }
    input.ops.reserve(count);
    TraceDecoder decoder(file.data(), file.size(), false);
    Event e;
    while (decoder.next(e)) {
      std::uint64_t extra = e.op == Op::Realloc ? e.oldId : e.alignment;
      input.ops.push_back({e.id << 8 | static_cast<std::uint64_t>(e.op), e.size, extra});
    }
  } catch (const std::exception& exception) {
    error = exception.what();
    return 1;
  }
  return 0;
}

// One line of JSON: the figures heapkit-replay reports; `extra` is appended inside it.
inline void printReplay(const ReplayInput& input, const Measurement& m, bool touchMemory, const std::string& mallocLibrary,
                        const std::string& extra) {
  std::printf(
      "{\"operations\": %zu, \"seconds\": %.9f, \"ns_per_op\": %.3f, \"baseline_rss_bytes\": %llu, "
      "\"peak_rss_bytes\": %llu, \"footprint_bytes\": %llu, \"end_rss_bytes\": %llu, \"max_live_bytes\": %llu, "
      "\"failed_allocations\": %llu, \"touch\": %s, \"peak_reset\": %s, \"malloc_library\": %s%s}\n",
      input.ops.size(), m.elapsed, input.ops.empty() ? 0.0 : m.elapsed * 1e9 / static_cast<double>(input.ops.size()),
      static_cast<unsigned long long>(m.baseline), static_cast<unsigned long long>(m.peak),
      static_cast<unsigned long long>(m.peak > m.baseline ? m.peak - m.baseline : 0),
      static_cast<unsigned long long>(m.end), static_cast<unsigned long long>(input.maxLive),
      static_cast<unsigned long long>(m.failures), touchMemory ? "true" : "false", m.peakReset ? "true" : "false",
      mallocLibrary.c_str(), extra.c_str());
}

// A design's own footprint, for the JSON line.
template <class Heap>
std::string heldJson(const Heap& heap) {
  return ", \"heap_peak_bytes_held\": " + std::to_string(heap.peakBytesHeld()) + ", \"heap_end_bytes_held\": " +
         std::to_string(heap.bytesHeld());
}

}  // namespace heapkit::trace::replay
