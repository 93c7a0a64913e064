// heapkit-replay TRACE [--no-touch] [--footprint-samples N] [--spec FILE [--counted]]: performs a trace's
// operations, in trace order on one thread, against the process's malloc (or, with --spec,
// against that DMM design running as a real allocator in this process, its
// ANSIWrapper<DmmHeap<RealMemory>> called directly), and prints one line of JSON:
//   operations, seconds, cpu_seconds (the replaying thread's), ns_per_op, baseline_rss_bytes,
//   peak_rss_bytes, footprint_bytes, max_live_bytes (from the trace), end_rss_bytes,
//   malloc_library (the file that defines the malloc this process calls: a preloaded
//   library that does not define one leaves the C library's, which the caller must not
//   report as the library's figures);
//   with --spec also heap_peak_bytes_held and heap_end_bytes_held (the design's own
//   footprint, which the simulator predicts to the byte), and with --counted its work
//   counts (steps, reads, writes: counting compiled in, so slower); with --footprint-samples,
//   the resident set's growth at N points of the replay (footprint over time).
// The trace is decoded into memory first, so decoding is not timed; the operations are
// then applied by the trace loop the simulator uses (heapkit/trace/TraceLoop.h: glibc's
// semantics, realloc(p, 0) included). Footprint is the peak
// resident set during the replay minus the resident set before it (the decoded operations
// and the object table). Each allocated object gets one byte written per page, as a program
// that uses its memory would, so that untouched allocations do not hide footprint
// (--no-touch turns that off). The peak is VmHWM, reset through /proc/self/clear_refs
// just before the replay (peak_reset says whether that worked). Exit status: 0, 1 for usage
// or I/O errors, 2 for a bad trace or spec.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "Spec.h"
#include "heapkit/dmm/DmmHeap.h"
#include "TimedReplay.h"
#include "heapkit/wrapper/ANSIWrapper.h"

using namespace heapkit::replay;

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
  std::uint64_t footprintSamples = 0;
  const char* usage = "usage: heapkit-replay TRACE [--no-touch] [--footprint-samples N] [--spec FILE [--counted]]\n";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-touch") == 0) touchMemory = false;
    else if (std::strcmp(argv[i], "--counted") == 0) counted = true;
    else if (std::strcmp(argv[i], "--spec") == 0 && i + 1 < argc) specPath = argv[++i];
    else if (std::strcmp(argv[i], "--footprint-samples") == 0 && i + 1 < argc) footprintSamples = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--help") == 0 || argv[i][0] == '-' || path != nullptr) {
      std::fputs(usage, stderr);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 1;
    } else path = argv[i];
  }
  if (path == nullptr || (counted && specPath == nullptr)) {
    std::fputs(usage, stderr);
    return 1;
  }

  ReplayInput input;
  std::string error;
  if (int status = loadReplay(path, input, error); status != 0) {
    std::fprintf(stderr, "heapkit-replay: %s\n", error.c_str());
    return status;
  }
  Measurement measured;
  std::string extraJson;
  if (specPath == nullptr) {
    ProcessMalloc processMalloc;
    if (footprintSamples == 0) {
      measured = measureReplay(processMalloc, input, touchMemory);
    } else {
      MmapVector<std::pair<std::uint64_t, std::uint64_t>> samples;
      samples.reserve(footprintSamples + 1);
      std::uint64_t every = input.ops.size() / footprintSamples + 1;
      measured = measureReplay(processMalloc, input, touchMemory, &samples, every);
      extraJson = ", \"footprint_samples\": [";
      for (std::size_t i = 0; i < samples.size(); ++i)
        extraJson += (i == 0 ? "[" : ", [") + std::to_string(samples[i].first) + ", " + std::to_string(samples[i].second) + "]";
      extraJson += "]";
    }
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
      measured = measureReplay(heap, input, touchMemory);
      const heapkit::WorkCounts& counts = heap.workCounts();
      extraJson = heldJson(heap) + ", \"steps\": " + std::to_string(counts.steps) + ", \"reads\": " +
                  std::to_string(counts.reads) + ", \"writes\": " + std::to_string(counts.writes);
    } else {
      heapkit::ANSIWrapper<heapkit::DmmHeap<heapkit::RealMemory>> heap(spec.dmm);
      measured = measureReplay(heap, input, touchMemory);
      extraJson = heldJson(heap);
    }
  }

  printReplay(input, measured, touchMemory, mallocLibraryJson(), extraJson);
  return 0;
}
