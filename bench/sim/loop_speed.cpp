// heapkit-loop-speed TRACE [REPEATS]: what the simulator's loop costs apart from the
// allocator it simulates. The loop (SimulationLoop: batched decoding, the one trace loop,
// the live-object table, footprint accounting) runs over a trivial heap that does almost
// nothing per call, so its events/s bound the simulator's from above: the figure the
// simulator reaches with an allocator that takes no time. Also the decoder alone, batch by
// batch, as the loop calls it. Prints one line of JSON (medians and bests of REPEATS, in
// the thread's CPU time).
//
// For instruction counts: valgrind --tool=callgrind build/bench/sim/heapkit-loop-speed TRACE 1
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "SimulationLoop.h"
#include "heapkit/trace/Reader.h"

namespace {

// Bump allocation from a reserved range, and one LIFO free list per size class (16-byte
// classes up to 4 KiB, powers of two above), the class in a header word: a malloc or a
// free is a handful of instructions, and memory is reused as the trace frees it, so the
// pages touched stay near the live bytes.
class TrivialHeap {
 public:
  static constexpr std::size_t kHeader = 16;

  // As much as the process may reserve up to 64 GiB (valgrind allows less).
  TrivialHeap() {
    for (reserved_ = std::size_t{64} << 30; reserved_ >= (std::size_t{1} << 30); reserved_ /= 2) {
      void* range = mmap(nullptr, reserved_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (range == MAP_FAILED) continue;
      base_ = top_ = static_cast<char*>(range);
      return;
    }
    throw std::bad_alloc();
  }
  ~TrivialHeap() { munmap(base_, reserved_); }
  TrivialHeap(const TrivialHeap&) = delete;
  TrivialHeap& operator=(const TrivialHeap&) = delete;

  [[gnu::noinline]] void* malloc(std::size_t size) {
    unsigned c = classOf(size);
    if (void* object = free_[c]) {
      free_[c] = *static_cast<void**>(object);
      return object;
    }
    return bump(c, kHeader);
  }
  [[gnu::noinline]] void free(void* object) {
    if (object == nullptr) return;
    unsigned c = classAt(object);
    *static_cast<void**>(object) = free_[c];
    free_[c] = object;
  }
  [[gnu::noinline]] std::size_t getSize(void* object) { return bytesOf(classAt(object)); }
  void* calloc(std::size_t count, std::size_t size) {
    std::size_t bytes;
    return __builtin_mul_overflow(count, size, &bytes) ? nullptr : malloc(bytes);
  }
  void* realloc(void* object, std::size_t size) {
    if (object == nullptr) return malloc(size);
    if (size == 0) {
      free(object);
      return nullptr;
    }
    if (size <= getSize(object)) return object;
    void* moved = malloc(size);
    if (moved != nullptr) free(object);
    return moved;
  }
  int posix_memalign(void** result, std::size_t alignment, std::size_t size) {
    *result = alignment <= kHeader ? malloc(size) : bump(classOf(size), alignment);
    return *result != nullptr ? 0 : 12;
  }
  std::size_t bytesHeld() const { return static_cast<std::size_t>(top_ - base_); }
  std::size_t peakBytesHeld() const { return bytesHeld(); }

 private:
  static unsigned classOf(std::size_t size) {
    if (size <= 4096) return static_cast<unsigned>((size + 15) >> 4);
    return 256 + static_cast<unsigned>(std::bit_width(size - 1));
  }
  static std::size_t bytesOf(unsigned c) { return c <= 256 ? std::size_t{c} << 4 : std::size_t{1} << (c - 256); }
  static unsigned classAt(void* object) { return static_cast<unsigned*>(object)[-1]; }

  void* bump(unsigned c, std::size_t alignment) {
    std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(top_) + kHeader + alignment - 1) & ~(alignment - 1);
    std::size_t bytes = std::max<std::size_t>(bytesOf(c), 16);
    if (at + bytes > reinterpret_cast<std::uintptr_t>(base_) + reserved_) return nullptr;
    top_ = reinterpret_cast<char*>(at + bytes);
    static_cast<unsigned*>(reinterpret_cast<void*>(at))[-1] = c;
    return reinterpret_cast<void*>(at);
  }

  std::size_t reserved_;
  char* base_;
  char* top_;
  void* free_[256 + 65] = {};
};

// The thread's CPU time (user and system): other load on a shared machine does not count.
double seconds() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: heapkit-loop-speed TRACE [REPEATS]\n");
    return 1;
  }
  int repeats = std::max(argc > 2 ? std::atoi(argv[2]) : 5, 1);
  try {
    heapkit::trace::MappedFile file(argv[1]);
    std::vector<double> loopTimes, decodeTimes;
    std::uint64_t events = 0, checksum = 0;
    for (int r = 0; r < repeats; ++r) {
      {
        heapkit::trace::TraceDecoder decoder(file.data(), file.size());
        heapkit::trace::Operation batch[heapkit::sim::SimulationLoop<TrivialHeap>::kBatch];
        double start = seconds();
        std::uint64_t sum = 0;
        while (std::size_t n = decoder.read(batch, std::size(batch)))
          for (std::size_t i = 0; i < n; ++i) sum += batch[i].idOp + batch[i].size;
        decodeTimes.push_back(seconds() - start);
        if (decoder.failed()) throw std::runtime_error(decoder.error());
        checksum = sum;
      }
      TrivialHeap heap;
      auto loop = std::make_unique<heapkit::sim::SimulationLoop<TrivialHeap>>(heap, 512);
      heapkit::trace::TraceDecoder decoder(file.data(), file.size());
      double start = seconds();
      events = loop->run(decoder, UINT64_MAX, [] { return false; });
      loopTimes.push_back(seconds() - start);
      if (decoder.failed()) throw std::runtime_error(decoder.error());
      if (loop->applier().counts().failedRequests != 0) throw std::runtime_error("the trivial heap failed a request");
    }
    std::sort(loopTimes.begin(), loopTimes.end());
    std::sort(decodeTimes.begin(), decodeTimes.end());
    auto rate = [events](double s) { return s > 0 ? static_cast<double>(events) / s : 0.0; };
    std::printf("{\"events\": %llu, \"loop_events_per_second\": %.0f, \"loop_best_events_per_second\": %.0f, "
                "\"decode_events_per_second\": %.0f, \"decode_best_events_per_second\": %.0f, \"checksum\": %llu}\n",
                static_cast<unsigned long long>(events), rate(loopTimes[loopTimes.size() / 2]), rate(loopTimes.front()),
                rate(decodeTimes[decodeTimes.size() / 2]), rate(decodeTimes.front()),
                static_cast<unsigned long long>(checksum));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "heapkit-loop-speed: %s\n", error.what());
    return 2;
  }
}
