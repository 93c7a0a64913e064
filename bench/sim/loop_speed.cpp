// heapkit-loop-speed TRACE [REPEATS]: what the simulator's loop costs apart from the
// allocator it simulates. The loop (SimulationLoop: batched decoding, the one trace loop,
// the live-object table, footprint accounting), run as the simulator runs it, over
//  - a bump heap that touches no memory at all: the loop alone, the rate the simulator
//    would reach with an allocator that took no time ("loop");
//  - a free-list heap that writes a header per block and reuses blocks, so that the
//    objects' memory is touched as a real allocator touches it ("loop_free_list");
// and the decoder alone, batch by batch, as the loop calls it. Prints one line of JSON:
// events per second, medians and bests of REPEATS runs, in the thread's CPU time.
//
// Instructions: valgrind --tool=callgrind build/bench/sim/heapkit-loop-speed TRACE 1
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

// 16-byte classes up to 4 KiB, powers of two above.
unsigned classOf(std::size_t size) {
  if (size <= 4096) return static_cast<unsigned>((size + 15) >> 4);
  return 256 + static_cast<unsigned>(std::bit_width(size - 1));
}
std::size_t bytesOf(unsigned c) { return c <= 256 ? std::size_t{c} << 4 : std::size_t{1} << (c - 256); }

// The C semantics the loop expects, over a heap's malloc, free and getSize.
template <class Self>
struct GlibcCalls {
  void* calloc(std::size_t count, std::size_t size) {
    std::size_t bytes;
    return __builtin_mul_overflow(count, size, &bytes) ? nullptr : self().malloc(bytes);
  }
  void* realloc(void* object, std::size_t size) {
    if (object == nullptr) return self().malloc(size);
    if (size == 0) {
      self().free(object);
      return nullptr;
    }
    if (size <= self().getSize(object)) return object;
    void* moved = self().malloc(size);
    if (moved != nullptr) self().free(object);
    return moved;
  }
  int posix_memalign(void** result, std::size_t alignment, std::size_t size) {
    *result = self().malloc(size < alignment ? alignment : size);
    return *result != nullptr ? 0 : 12;
  }

 private:
  Self& self() { return static_cast<Self&>(*this); }
};

// Addresses that are only numbers, never touched: each size class bumps through its own
// 2^38 bytes of the (unmapped) address space, so the class is the address's top bits.
// Bytes held grow in 64 KiB chunks, as an allocator's do.
class BumpHeap : public GlibcCalls<BumpHeap> {
 public:
  [[gnu::noinline]] void* malloc(std::size_t size) {
    unsigned c = classOf(size);
    std::uint64_t at = (std::uint64_t{c} << 38) + 16 + bumped_[c];
    bumped_[c] += std::max<std::size_t>(bytesOf(c), 16);
    total_ += std::max<std::size_t>(bytesOf(c), 16);
    return reinterpret_cast<void*>(at);
  }
  [[gnu::noinline]] void free(void*) {}
  [[gnu::noinline]] std::size_t getSize(void* object) {
    return bytesOf(static_cast<unsigned>(reinterpret_cast<std::uint64_t>(object) >> 38));
  }
  std::size_t bytesHeld() const { return (total_ + 65535) & ~std::size_t{65535}; }
  std::size_t peakBytesHeld() const { return bytesHeld(); }

 private:
  std::uint64_t bumped_[256 + 65] = {};
  std::size_t total_ = 0;
};

// Bump allocation from a reserved range, and one LIFO free list per size class, the class
// in a header word: a malloc or a free is a handful of instructions, and memory is reused
// as the trace frees it, so the pages touched stay near the live bytes.
class FreeListHeap : public GlibcCalls<FreeListHeap> {
 public:
  static constexpr std::size_t kHeader = 16;

  // As much as the process may reserve up to 64 GiB (valgrind allows less).
  FreeListHeap() {
    for (reserved_ = std::size_t{64} << 30; reserved_ >= (std::size_t{1} << 30); reserved_ /= 2) {
      void* range = mmap(nullptr, reserved_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (range == MAP_FAILED) continue;
      base_ = top_ = static_cast<char*>(range);
      return;
    }
    throw std::bad_alloc();
  }
  ~FreeListHeap() { munmap(base_, reserved_); }
  FreeListHeap(const FreeListHeap&) = delete;
  FreeListHeap& operator=(const FreeListHeap&) = delete;

  [[gnu::noinline]] void* malloc(std::size_t size) {
    unsigned c = classOf(size);
    if (void* object = free_[c]) {
      free_[c] = *static_cast<void**>(object);
      return object;
    }
    std::size_t bytes = std::max<std::size_t>(bytesOf(c), 16);
    if (static_cast<std::size_t>(top_ - base_) + kHeader + bytes > reserved_) return nullptr;
    char* object = top_ + kHeader;
    top_ = object + bytes;
    reinterpret_cast<unsigned*>(object)[-1] = c;
    return object;
  }
  [[gnu::noinline]] void free(void* object) {
    if (object == nullptr) return;
    unsigned c = classAt(object);
    *static_cast<void**>(object) = free_[c];
    free_[c] = object;
  }
  [[gnu::noinline]] std::size_t getSize(void* object) { return bytesOf(classAt(object)); }
  std::size_t bytesHeld() const { return (static_cast<std::size_t>(top_ - base_) + 65535) & ~std::size_t{65535}; }
  std::size_t peakBytesHeld() const { return bytesHeld(); }

 private:
  static unsigned classAt(void* object) { return static_cast<unsigned*>(object)[-1]; }

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

// The simulator's loop over a fresh heap of the kind, as Simulation runs it (no liveness
// bits in the decoder); its CPU seconds.
template <class Heap>
double timeLoop(const heapkit::trace::MappedFile& file, std::uint64_t& events) {
  auto heap = std::make_unique<Heap>();
  auto loop = std::make_unique<heapkit::sim::SimulationLoop<Heap>>(*heap, 512);
  heapkit::trace::TraceDecoder decoder(file.data(), file.size(), false);
  double start = seconds();
  events = loop->run(decoder, UINT64_MAX, [] { return false; });
  double elapsed = seconds() - start;
  if (decoder.failed()) throw std::runtime_error(decoder.error());
  if (loop->applier().counts().failedRequests != 0) throw std::runtime_error("a trivial heap failed a request");
  return elapsed;
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
    std::vector<double> bump, freeList, decode;
    std::uint64_t events = 0;
    for (int r = 0; r < repeats; ++r) {
      {
        heapkit::trace::TraceDecoder decoder(file.data(), file.size(), false);
        heapkit::trace::Operation batch[heapkit::sim::SimulationLoop<BumpHeap>::kBatch];
        double start = seconds();
        std::uint64_t sum = 0;
        while (std::size_t n = decoder.read(batch, std::size(batch)))
          for (std::size_t i = 0; i < n; ++i) sum += batch[i].idOp + batch[i].size;
        decode.push_back(seconds() - start);
        if (decoder.failed()) throw std::runtime_error(decoder.error());
        if (sum == 42) std::puts("");  // keeps the sum alive
      }
      bump.push_back(timeLoop<BumpHeap>(file, events));
      freeList.push_back(timeLoop<FreeListHeap>(file, events));
    }
    auto rates = [events](std::vector<double>& times) {
      std::sort(times.begin(), times.end());
      auto rate = [events](double s) { return s > 0 ? static_cast<double>(events) / s : 0.0; };
      return std::pair(rate(times[times.size() / 2]), rate(times.front()));
    };
    auto [loop, loopBest] = rates(bump);
    auto [withFreeList, withFreeListBest] = rates(freeList);
    auto [decoding, decodingBest] = rates(decode);
    std::printf("{\"events\": %llu, \"loop_events_per_second\": %.0f, \"loop_best_events_per_second\": %.0f, "
                "\"loop_free_list_events_per_second\": %.0f, \"loop_free_list_best_events_per_second\": %.0f, "
                "\"decode_events_per_second\": %.0f, \"decode_best_events_per_second\": %.0f}\n",
                static_cast<unsigned long long>(events), loop, loopBest, withFreeList, withFreeListBest, decoding,
                decodingBest);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "heapkit-loop-speed: %s\n", error.what());
    return 2;
  }
}
