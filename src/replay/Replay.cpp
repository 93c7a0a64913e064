// heapkit-replay TRACE [--no-touch] [--spec FILE [--counted]]: performs a trace's
// operations, in trace order on one thread, against the process's malloc (or, with --spec,
// against that DMM design running as a real allocator in this process, its
// ANSIWrapper<DmmHeap<RealMemory>> called directly), and prints one line of JSON:
//   operations, seconds, ns_per_op, baseline_rss_bytes, peak_rss_bytes, footprint_bytes,
//   max_live_bytes (from the trace), end_rss_bytes, malloc_library (the file that
//   defines the malloc this process calls: a preloaded library that does not define one
//   leaves the C library's, which the caller must not report as the library's figures);
//   with --spec also heap_peak_bytes_held and heap_end_bytes_held (the design's own
//   footprint, which the simulator predicts to the byte), and with --counted its work
//   counts (steps, reads, writes: counting compiled in, so slower).
// The trace is decoded into memory first, so decoding is not timed; footprint is the peak
// resident set during the replay minus the resident set before it (the decoded operations
// and the object table). Each allocated object gets one byte written per page, as a program
// that uses its memory would, so that untouched allocations do not hide footprint
// (--no-touch turns that off). The peak is VmHWM, reset through /proc/self/clear_refs
// just before the replay (peak_reset says whether that worked). Exit status: 0, 1 for usage
// or I/O errors, 2 for a bad trace or spec.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "Spec.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/wrapper/ANSIWrapper.h"

using namespace heapkit::trace;

namespace {

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

std::uint64_t residentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%lu %lu", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return std::uint64_t{resident} * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// The peak resident set (VmHWM), which resetPeak() sets back to the current one so that
// decoding the trace does not count.
std::uint64_t peakResidentBytes() {
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

bool resetPeak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double seconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

inline void touch(void* object, std::uint64_t size) {
  auto* bytes = static_cast<volatile unsigned char*>(object);
  for (std::uint64_t at = 0; at < size; at += kPage) bytes[at] = 1;
}

}  // namespace

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
template <class Allocator>
Measurement measureReplay(Allocator& allocator, const MmapVector<ReplayOp>& ops, MmapVector<void*>& slots,
                          bool touchMemory) {
  Measurement m;
  m.peakReset = resetPeak();
  m.baseline = residentBytes();
  double start = seconds();
  for (const ReplayOp& op : ops) {
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

template <class Heap>
std::string designJson(const Heap& heap) {
  return ", \"heap_peak_bytes_held\": " + std::to_string(heap.peakBytesHeld()) + ", \"heap_end_bytes_held\": " +
         std::to_string(heap.bytesHeld());
}

// The file that defines the malloc this process calls, as a JSON string.
static std::string mallocLibraryJson() {
  Dl_info info{};
  void* (*mallocFunction)(std::size_t) = &malloc;
  const char* file = dladdr(reinterpret_cast<void*>(mallocFunction), &info) != 0 && info.dli_fname != nullptr
                         ? info.dli_fname
                         : "";
  std::string json = "\"";
  for (const char* c = file; *c != '\0'; ++c) {
    if (*c == '"' || *c == '\\') json += '\\';
    if (static_cast<unsigned char>(*c) < 0x20) continue;  // no control characters in a path we report
    json += *c;
  }
  return json + "\"";
}

int main(int argc, char** argv) {
  bool touchMemory = true;
  bool counted = false;
  const char* path = nullptr;
  const char* specPath = nullptr;
  const char* usage = "usage: heapkit-replay TRACE [--no-touch] [--spec FILE [--counted]]\n";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-touch") == 0) touchMemory = false;
    else if (std::strcmp(argv[i], "--counted") == 0) counted = true;
    else if (std::strcmp(argv[i], "--spec") == 0 && i + 1 < argc) specPath = argv[++i];
    else if (std::strcmp(argv[i], "--help") == 0 || argv[i][0] == '-' || path != nullptr) {
      std::fputs(usage, stderr);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 1;
    } else path = argv[i];
  }
  if (path == nullptr || (counted && specPath == nullptr)) {
    std::fputs(usage, stderr);
    return 1;
  }

  MmapVector<ReplayOp> ops;
  std::uint64_t objects = 0, maxLive = 0;
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
          if (live > maxLive) maxLive = live;
        }
      }
      if (decoder.failed()) {
        std::fprintf(stderr, "heapkit-replay: %s: %s\n", path, decoder.error().c_str());
        return 2;
      }
      objects = decoder.objects();
    }
    ops.reserve(count);
    TraceDecoder decoder(file.data(), file.size(), false);
    Event e;
    while (decoder.next(e)) {
      std::uint64_t extra = e.op == Op::Realloc ? e.oldId : e.alignment;
      ops.push_back({e.id << 8 | static_cast<std::uint64_t>(e.op), e.size, extra});
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "heapkit-replay: %s\n", error.what());
    return 1;
  }

  MmapVector<void*> slots(objects, nullptr);
  Measurement measured;
  std::string extraJson;
  if (specPath == nullptr) {
    ProcessMalloc processMalloc;
    measured = measureReplay(processMalloc, ops, slots, touchMemory);
  } else {
    heapkit::sim::ParsedSpec spec;
    try {
      spec = heapkit::sim::loadSpec(specPath);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "heapkit-replay: %s\n", error.what());
      return 2;
    }
    if (counted) {
      heapkit::ANSIWrapper<heapkit::DmmHeap<heapkit::CountedMemory>> heap(spec.dmm);
      measured = measureReplay(heap, ops, slots, touchMemory);
      const heapkit::WorkCounts& counts = heap.workCounts();
      extraJson = designJson(heap) + ", \"steps\": " + std::to_string(counts.steps) + ", \"reads\": " +
                  std::to_string(counts.reads) + ", \"writes\": " + std::to_string(counts.writes);
    } else {
      heapkit::ANSIWrapper<heapkit::DmmHeap<heapkit::RealMemory>> heap(spec.dmm);
      measured = measureReplay(heap, ops, slots, touchMemory);
      extraJson = designJson(heap);
    }
  }

  std::printf(
      "{\"operations\": %zu, \"seconds\": %.9f, \"ns_per_op\": %.3f, \"baseline_rss_bytes\": %llu, "
      "\"peak_rss_bytes\": %llu, \"footprint_bytes\": %llu, \"end_rss_bytes\": %llu, \"max_live_bytes\": %llu, "
      "\"failed_allocations\": %llu, \"touch\": %s, \"peak_reset\": %s, \"malloc_library\": %s%s}\n",
      ops.size(), measured.elapsed, ops.empty() ? 0.0 : measured.elapsed * 1e9 / static_cast<double>(ops.size()),
      static_cast<unsigned long long>(measured.baseline), static_cast<unsigned long long>(measured.peak),
      static_cast<unsigned long long>(measured.peak > measured.baseline ? measured.peak - measured.baseline : 0),
      static_cast<unsigned long long>(measured.end), static_cast<unsigned long long>(maxLive),
      static_cast<unsigned long long>(measured.failures), touchMemory ? "true" : "false",
      measured.peakReset ? "true" : "false", mallocLibraryJson().c_str(), extraJson.c_str());
  return 0;
}
