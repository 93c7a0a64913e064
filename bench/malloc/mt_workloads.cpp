// heapkit-mt-workload <name> <threads> [scale]: multi-threaded allocation workloads that
// use only the C library's malloc family, so that LD_PRELOAD can put any malloc under
// them. Prints a checksum that is the same on every correct allocator.
//   server     threads hand objects to each other through a shared table of slots, so
//              most objects are freed by a thread that did not allocate them;
//   churn      thread-private: each thread keeps a working set and replaces objects at
//              random (Larson-like, without the hand-off);
//   falseshare each thread repeatedly frees and reallocates one small object and writes
//              to it; an allocator that puts two threads' objects in one cache line makes
//              the cores fight over it (Hoard's cache-scratch);
//   buffers    each thread replaces large short-lived buffers (16-256 KiB, as I/O and
//              string building use) in a working set of four, writing one byte a page:
//              above many allocators' mmap threshold, so one that maps and unmaps every
//              buffer pays system calls and page faults for each.
//   bigblocks  each thread replaces big blocks (5-25 MiB, as images, decompressed files and
//              matrices are) in a working set of two, writing every page: an allocator that
//              maps, faults in and unmaps each one spends its time in the kernel, where
//              glibc, after raising its mmap threshold, reuses the pages it already has.
//   prodcons   producer/consumer (after xmalloc-test): <threads> producers fill records of
//              4096 pointers to 64-byte objects (a record is 32,776 bytes, just over many
//              allocators' small-object limit) and queue them, at most 100 in flight;
//              <threads> consumers free each record and its objects. Every block is freed
//              by a thread that did not allocate it. Prints the most records in flight
//              to stderr: the peak RSS follows it.
//   mixedstress  each thread keeps eight blocks of 120-710 KiB, replaces one at random
//              per round, writes a byte a page of the new one, and swaps one with a
//              shared table a quarter of the time, so blocks of that size move between
//              threads (after the suite's many-thread mixed-size stress test).
#include <atomic>
#include <cinttypes>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace {

std::uint64_t nextRandom(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// Mostly small objects with a tail, like servers' request objects.
std::size_t drawSize(std::uint64_t& state) {
  std::uint64_t r = nextRandom(state);
  if ((r & 15) == 0) return 256 + (r >> 8) % 4000;
  return 8 + (r >> 8) % 120;
}

std::uint64_t touch(void* block, std::size_t size, std::uint64_t tag) {
  auto* bytes = static_cast<unsigned char*>(block);
  bytes[0] = static_cast<unsigned char>(tag);
  bytes[size - 1] = static_cast<unsigned char>(tag >> 8);
  return bytes[0] + bytes[size - 1];
}

// Waits for the workers; the checksum is the sum of their sums.
template <class Sums>
std::uint64_t joinAndSum(std::vector<std::thread>& workers, const Sums& sums) {
  for (std::thread& worker : workers) worker.join();
  std::uint64_t total = 0;
  for (const auto& sum : sums) total += sum;
  return total;
}

std::uint64_t server(unsigned threads, unsigned scale) {
  constexpr std::size_t kSlots = 4096;
  std::vector<std::atomic<void*>> slots(kSlots);
  std::vector<std::atomic<std::uint64_t>> sums(threads);
  std::vector<std::thread> workers;
  const std::uint64_t requests = std::uint64_t{scale} * 100000 / threads;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::uint64_t state = 0x9E3779B97F4A7C15ULL * (t + 1), sum = 0;
      for (std::uint64_t i = 0; i < requests; ++i) {
        // A request: a few objects, published to the table; whatever was there (some
        // other thread's object, most of the time) is freed here.
        for (int k = 0; k < 4; ++k) {
          std::size_t size = drawSize(state);
          void* block = std::malloc(size);
          if (block == nullptr) std::abort();
          sum += touch(block, size, i);
          void* old = slots[nextRandom(state) % kSlots].exchange(block, std::memory_order_acq_rel);
          std::free(old);
        }
      }
      sums[t] = sum;
    });
  std::uint64_t total = joinAndSum(workers, sums);
  for (auto& slot : slots) std::free(slot.exchange(nullptr));
  return total;
}

std::uint64_t churn(unsigned threads, unsigned scale) {
  std::vector<std::uint64_t> sums(threads);
  std::vector<std::thread> workers;
  const std::uint64_t rounds = std::uint64_t{scale} * 400000 / threads;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      constexpr std::size_t kLive = 2000;
      std::vector<void*> live(kLive, nullptr);
      std::vector<std::size_t> sizes(kLive, 0);
      std::uint64_t state = 0xD1B54A32D192ED03ULL * (t + 1), sum = 0;
      for (std::uint64_t i = 0; i < rounds; ++i) {
        std::size_t victim = nextRandom(state) % kLive;
        if (live[victim]) sum += static_cast<unsigned char*>(live[victim])[0];
        std::free(live[victim]);
        sizes[victim] = drawSize(state);
        live[victim] = std::malloc(sizes[victim]);
        if (live[victim] == nullptr) std::abort();
        touch(live[victim], sizes[victim], i);
      }
      for (void* block : live) std::free(block);
      sums[t] = sum;
    });
  return joinAndSum(workers, sums);
}

std::uint64_t falseshare(unsigned threads, unsigned scale) {
  // Objects allocated back to back by one thread, then each handed to a worker, which
  // frees it and allocates its own: both the active and the passive form.
  std::vector<void*> initial(threads);
  for (unsigned t = 0; t < threads; ++t) initial[t] = std::malloc(8);
  std::vector<std::uint64_t> sums(threads);
  std::vector<std::thread> workers;
  const std::uint64_t rounds = std::uint64_t{scale} * 1000 / threads;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      auto* object = static_cast<volatile char*>(initial[t]);
      std::uint64_t sum = 0;
      for (std::uint64_t round = 0; round < rounds; ++round) {
        std::free(const_cast<char*>(object));
        object = static_cast<volatile char*>(std::malloc(8));
        for (int write = 0; write < 5000; ++write) {
          object[write & 7] = static_cast<char>(object[write & 7] + 1);
        }
        sum += static_cast<unsigned char>(object[0]);
      }
      std::free(const_cast<char*>(object));
      sums[t] = sum > 0;
    });
  return joinAndSum(workers, sums);
}

// Each thread keeps `live` blocks of minBytes to minBytes + spanBytes, replaces a random
// one per round and writes a byte in every page of the new one (so its pages are faulted
// in, as a program filling a buffer would).
std::uint64_t replaceTouchedBlocks(unsigned threads, std::uint64_t totalRounds, std::size_t live, std::size_t minBytes,
                                   std::size_t spanBytes, std::uint64_t seed) {
  std::vector<std::uint64_t> sums(threads);
  std::vector<std::thread> workers;
  const std::uint64_t rounds = totalRounds / threads;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      constexpr std::size_t kPage = 4096;
      std::vector<void*> blocks(live, nullptr);
      std::uint64_t state = seed * (t + 1), sum = 0;
      for (std::uint64_t i = 0; i < rounds; ++i) {
        std::size_t victim = nextRandom(state) % live;
        if (blocks[victim]) sum += static_cast<unsigned char*>(blocks[victim])[0];
        std::free(blocks[victim]);
        std::size_t size = minBytes + nextRandom(state) % spanBytes;
        auto* bytes = static_cast<unsigned char*>(std::malloc(size));
        if (bytes == nullptr) std::abort();
        for (std::size_t offset = 0; offset < size; offset += kPage) bytes[offset] = static_cast<unsigned char>(i + offset);
        blocks[victim] = bytes;
      }
      for (void* block : blocks) std::free(block);
      sums[t] = sum;
    });
  return joinAndSum(workers, sums);
}

std::uint64_t buffers(unsigned threads, unsigned scale) {
  return replaceTouchedBlocks(threads, std::uint64_t{scale} * 2000, 4, 16 * 1024, 240 * 1024, 0x9E3779B97F4A7C15ULL);
}

std::uint64_t bigblocks(unsigned threads, unsigned scale) {
  constexpr std::size_t kMiB = 1024 * 1024;
  return replaceTouchedBlocks(threads, std::uint64_t{scale} * 10, 2, 5 * kMiB, 20 * kMiB, 0xD1B54A32D192ED03ULL);
}

std::uint64_t prodcons(unsigned threads, unsigned scale) {
  constexpr std::size_t kObjects = 4096, kObjectBytes = 64, kInFlight = 100;
  struct Record {
    Record* next;
    void* objects[kObjects];
  };
  static_assert(sizeof(Record) == 32776);
  std::mutex lock;
  std::condition_variable notEmpty, notFull;
  Record* queue = nullptr;
  std::size_t queued = 0, mostQueued = 0;
  const std::uint64_t recordsPerProducer = std::uint64_t{scale} * 40 / threads;
  std::size_t producersLeft = threads;
  std::vector<std::uint64_t> sums(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < recordsPerProducer; ++i) {
        auto* record = static_cast<Record*>(std::malloc(sizeof(Record)));
        if (record == nullptr) std::abort();
        for (std::size_t k = 0; k < kObjects; ++k) {
          record->objects[k] = std::malloc(kObjectBytes);
          if (record->objects[k] == nullptr) std::abort();
          std::memset(record->objects[k], static_cast<int>((k + i + t) & 0xff), kObjectBytes);
        }
        std::unique_lock<std::mutex> guard(lock);
        notFull.wait(guard, [&] { return queued < kInFlight; });
        record->next = queue;
        queue = record;
        if (++queued > mostQueued) mostQueued = queued;
        notEmpty.notify_one();
      }
      std::lock_guard<std::mutex> guard(lock);
      if (--producersLeft == 0) notEmpty.notify_all();
    });
    workers.emplace_back([&, t] {
      std::uint64_t sum = 0;
      for (;;) {
        Record* record;
        {
          std::unique_lock<std::mutex> guard(lock);
          notEmpty.wait(guard, [&] { return queue != nullptr || producersLeft == 0; });
          if (queue == nullptr) break;
          record = queue;
          queue = record->next;
          --queued;
          notFull.notify_one();
        }
        for (void* object : record->objects) {
          sum += static_cast<unsigned char*>(object)[kObjectBytes - 1];
          std::free(object);
        }
        std::free(record);
      }
      sums[t] = sum;
    });
  }
  std::uint64_t total = joinAndSum(workers, sums);
  // The peak RSS follows the records in flight at the peak, which the threads' relative
  // speed decides (a faster producer fills the queue): told apart from the checksum.
  std::fprintf(stderr, "prodcons: at most %zu records in flight\n", mostQueued);
  return total;
}

// A block of mixedstress starts with its size, which its free checks: blocks move between
// threads in an order that depends on timing, so the checksum is the bytes each thread
// allocated, the same on every run and every correct allocator.
std::size_t checkedSize(void* block) {
  if (block == nullptr) return 0;
  std::size_t size;
  std::memcpy(&size, block, sizeof size);
  if (static_cast<unsigned char*>(block)[size - 1] != static_cast<unsigned char>(size)) {
    std::fprintf(stderr, "mixedstress: a block of %zu bytes was overwritten\n", size);
    std::abort();
  }
  return size;
}

std::uint64_t mixedstress(unsigned threads, unsigned scale) {
  constexpr std::size_t kLive = 8, kSlots = 64, kPage = 4096;
  constexpr std::size_t kMinBytes = 120 * 1024, kSpanBytes = 590 * 1024;
  std::vector<std::atomic<void*>> shared(kSlots);
  std::vector<std::uint64_t> sums(threads);
  std::vector<std::thread> workers;
  const std::uint64_t rounds = std::uint64_t{scale} * 1000 / threads;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<void*> blocks(kLive, nullptr);
      std::uint64_t state = 0xA0761D6478BD642FULL * (t + 1), sum = 0;
      for (std::uint64_t i = 0; i < rounds; ++i) {
        std::size_t victim = nextRandom(state) % kLive;
        checkedSize(blocks[victim]);
        std::free(blocks[victim]);
        std::size_t size = kMinBytes + nextRandom(state) % kSpanBytes;
        auto* bytes = static_cast<unsigned char*>(std::malloc(size));
        if (bytes == nullptr) std::abort();
        for (std::size_t offset = 0; offset < size; offset += kPage) bytes[offset] = static_cast<unsigned char>(i + offset);
        std::memcpy(bytes, &size, sizeof size);
        bytes[size - 1] = static_cast<unsigned char>(size);
        blocks[victim] = bytes;
        sum += size;
        // A quarter of the rounds, a block moves to the shared table and another comes back.
        if ((nextRandom(state) & 3) == 0) {
          std::size_t mine = nextRandom(state) % kLive;
          blocks[mine] = shared[nextRandom(state) % kSlots].exchange(blocks[mine]);
        }
      }
      for (void* block : blocks) {
        checkedSize(block);
        std::free(block);
      }
      sums[t] = sum;
    });
  std::uint64_t total = joinAndSum(workers, sums);
  for (auto& slot : shared) {
    void* block = slot.exchange(nullptr);
    checkedSize(block);
    std::free(block);
  }
  return total;
}

struct Workload {
  std::string_view name;
  std::uint64_t (*run)(unsigned threads, unsigned scale);
  unsigned defaultScale;
};
constexpr Workload kWorkloads[] = {
    {"server", server, 100},     {"churn", churn, 100},     {"falseshare", falseshare, 100}, {"buffers", buffers, 100},
    {"bigblocks", bigblocks, 30}, {"prodcons", prodcons, 100}, {"mixedstress", mixedstress, 100}};

}  // namespace

int main(int argc, char** argv) {
  const Workload* workload = nullptr;
  for (const Workload& known : kWorkloads)
    if (argc >= 3 && known.name == argv[1]) workload = &known;
  char* end = nullptr;
  unsigned long threads = argc >= 3 ? std::strtoul(argv[2], &end, 10) : 0;
  if (workload == nullptr || threads == 0 || threads > 256 || *end != '\0' || argc > 4) {
    std::fprintf(stderr, "usage: %s server|churn|falseshare|buffers|bigblocks|prodcons|mixedstress <threads 1-256> [scale]\n",
                 argv[0]);
    return 2;
  }
  unsigned long scale = workload->defaultScale;
  if (argc == 4) {
    scale = std::strtoul(argv[3], &end, 10);
    if (*end != '\0' || scale == 0 || scale > 100000) {
      std::fprintf(stderr, "scale must be a positive integer\n");
      return 2;
    }
  }
  std::uint64_t checksum = workload->run(static_cast<unsigned>(threads), static_cast<unsigned>(scale));
  std::printf("%s threads %lu scale %lu checksum %016" PRIx64 "\n", argv[1], threads, scale, checksum);
  return 0;
}
