// Every function of the malloc family, called through its real symbol, in a process whose
// malloc is a heapkit allocator: linked in (heapkit_link_allocator) or preloaded
// (LD_PRELOAD). Each test first proves that glibc's heap is not the one answering, so a
// function the wrapper forgot to interpose (aligned_alloc in Heap Layers upstream) fails.
#include <dlfcn.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

// Allocated by a constructor before main: must work and stay usable.
struct EarlyObjects {
  std::vector<std::string> strings;
  void* raw;
  EarlyObjects() {
    for (int i = 0; i < 100; ++i) strings.push_back(std::string(50 + i, static_cast<char>('a' + i % 26)));
    raw = std::malloc(1000);
    std::memset(raw, 0x11, 1000);
  }
};
EarlyObjects early;

bool aligned(const void* ptr, std::size_t alignment) { return reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0; }

// Bytes glibc's own heap has handed out. Stays flat while the replacement serves.
std::size_t glibcInUse() { return mallinfo2().uordblks; }

// Allocates ~4 MB through `allocate` and checks that glibc's heap did not grow.
template <class Allocate, class Release>
void expectServedByHeapkit(const char* what, Allocate allocate, Release release) {
  std::size_t before = glibcInUse();
  std::vector<void*> blocks;
  for (int i = 0; i < 4000; ++i) {
    void* ptr = allocate(1000);
    ASSERT_NE(ptr, nullptr) << what;
    std::memset(ptr, 1, 1000);
    blocks.push_back(ptr);
  }
  std::size_t during = glibcInUse();
  for (void* ptr : blocks) release(ptr);
  EXPECT_LT(during - before, std::size_t{256} << 10) << what << " was served by glibc's malloc";
}

TEST(EntryPoints, EveryFunctionIsInterposed) {
  expectServedByHeapkit("malloc", [](std::size_t n) { return malloc(n); }, [](void* p) { free(p); });
  expectServedByHeapkit("calloc", [](std::size_t n) { return calloc(n, 1); }, [](void* p) { free(p); });
  expectServedByHeapkit("realloc", [](std::size_t n) { return realloc(nullptr, n); }, [](void* p) { free(p); });
  expectServedByHeapkit("reallocarray", [](std::size_t n) { return reallocarray(nullptr, n, 1); }, [](void* p) { free(p); });
  expectServedByHeapkit("memalign", [](std::size_t n) { return memalign(64, n); }, [](void* p) { free(p); });
  expectServedByHeapkit("aligned_alloc", [](std::size_t n) { return aligned_alloc(64, n); }, [](void* p) { free(p); });
  expectServedByHeapkit("posix_memalign",
                        [](std::size_t n) {
                          void* p = nullptr;
                          return posix_memalign(&p, 64, n) == 0 ? p : nullptr;
                        },
                        [](void* p) { free(p); });
  expectServedByHeapkit("valloc", [](std::size_t n) { return valloc(n); }, [](void* p) { free(p); });
  expectServedByHeapkit("pvalloc", [](std::size_t n) { return pvalloc(n); }, [](void* p) { free(p); });
  expectServedByHeapkit("operator new", [](std::size_t n) { return ::operator new(n); }, [](void* p) { ::operator delete(p); });
  expectServedByHeapkit("operator new[]", [](std::size_t n) { return ::operator new[](n); },
                        [](void* p) { ::operator delete[](p, std::size_t{1000}); });
  expectServedByHeapkit("operator new nothrow", [](std::size_t n) { return ::operator new(n, std::nothrow); },
                        [](void* p) { ::operator delete(p, std::nothrow); });
  expectServedByHeapkit("aligned new", [](std::size_t n) { return ::operator new(n, std::align_val_t{128}); },
                        [](void* p) { ::operator delete(p, std::align_val_t{128}); });
  expectServedByHeapkit("aligned new[] nothrow",
                        [](std::size_t n) { return ::operator new[](n, std::align_val_t{128}, std::nothrow); },
                        [](void* p) { ::operator delete[](p, std::size_t{1000}, std::align_val_t{128}); });
}

TEST(EntryPoints, EarlyAllocationsSurvive) {
  ASSERT_EQ(early.strings.size(), 100u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(early.strings[i], std::string(50 + i, static_cast<char>('a' + i % 26)));
  auto* raw = static_cast<unsigned char*>(early.raw);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(raw[i], 0x11);
  EXPECT_GE(malloc_usable_size(early.raw), 1000u);
  early.raw = realloc(early.raw, 5000);  // may come from the bootstrap buffer: must move
  ASSERT_NE(early.raw, nullptr);
  raw = static_cast<unsigned char*>(early.raw);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(raw[i], 0x11);
}

TEST(EntryPoints, MallocFreeEdgeCases) {
  void* a = malloc(0);
  void* b = malloc(0);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a, b);
  EXPECT_TRUE(aligned(a, 16) && aligned(b, 16));
  free(a);
  free(b);
  free(nullptr);
  for (std::size_t n : {1, 15, 17, 100, 4097, 70000, 1 << 20}) {
    void* p = malloc(n);
    EXPECT_TRUE(aligned(p, 16)) << n;
    EXPECT_GE(malloc_usable_size(p), n);
    free(p);
  }
  EXPECT_EQ(malloc_usable_size(nullptr), 0u);
  for (std::size_t n : {SIZE_MAX, SIZE_MAX / 2 + 1, std::size_t{PTRDIFF_MAX} + 1}) {
    errno = 0;
    EXPECT_EQ(malloc(n), nullptr);
    EXPECT_EQ(errno, ENOMEM);
  }
}

TEST(EntryPoints, CallocEdgeCases) {
  errno = 0;
  EXPECT_EQ(calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(calloc(std::size_t{1} << 33, std::size_t{1} << 33), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* zero = calloc(0, 0);
  EXPECT_NE(zero, nullptr);
  free(zero);
  auto* dirty = static_cast<unsigned char*>(malloc(512));
  std::memset(dirty, 0xee, 512);
  free(dirty);
  auto* clean = static_cast<unsigned char*>(calloc(64, 8));
  for (int i = 0; i < 512; ++i) ASSERT_EQ(clean[i], 0);
  free(clean);
}

TEST(EntryPoints, ReallocEdgeCases) {
  auto* p = static_cast<unsigned char*>(realloc(nullptr, 16));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 16; ++i) p[i] = static_cast<unsigned char>(i * 3);
  for (std::size_t n : {32, 1000, 100000, 3000000, 100, 16}) {
    p = static_cast<unsigned char*>(realloc(p, n));
    ASSERT_NE(p, nullptr);
    for (int i = 0; i < 16; ++i) ASSERT_EQ(p[i], i * 3) << n;
  }
  void* same = realloc(p, malloc_usable_size(p));
  EXPECT_EQ(same, p) << "realloc to the usable size stays in place";
  errno = 0;
  EXPECT_EQ(realloc(p, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(p[i], i * 3) << "a failed realloc keeps the block";
  EXPECT_EQ(realloc(p, 0), nullptr) << "glibc: size 0 frees";
  void* fresh = realloc(nullptr, 0);
  EXPECT_NE(fresh, nullptr) << "realloc(NULL, 0) is malloc(0)";
  free(fresh);
  errno = 0;
  EXPECT_EQ(reallocarray(nullptr, SIZE_MAX / 2, 4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* array = reallocarray(nullptr, 100, 8);
  EXPECT_GE(malloc_usable_size(array), 800u);
  array = reallocarray(array, 1000, 8);
  EXPECT_GE(malloc_usable_size(array), 8000u);
  free(array);
}

TEST(EntryPoints, AlignedEdgeCases) {
  for (std::size_t alignment = 1; alignment <= (std::size_t{1} << 22); alignment *= 2) {
    for (std::size_t n : {0, 1, 100, 5000, 300000}) {
      void* p = memalign(alignment, n);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned(p, std::max<std::size_t>(alignment, 16))) << alignment << " " << n;
      EXPECT_GE(malloc_usable_size(p), n);
      std::memset(p, 3, n);
      free(p);
      if (alignment >= sizeof(void*)) {
        void* q = nullptr;
        ASSERT_EQ(posix_memalign(&q, alignment, n), 0);
        EXPECT_TRUE(aligned(q, alignment));
        free(q);
      }
      void* r = aligned_alloc(alignment, n);
      ASSERT_NE(r, nullptr);
      EXPECT_TRUE(aligned(r, alignment));
      free(r);
    }
  }
  void* odd = memalign(100, 10);  // glibc rounds up to 128
  EXPECT_TRUE(aligned(odd, 128));
  free(odd);
  errno = 0;
  EXPECT_EQ(memalign(SIZE_MAX, 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(memalign(64, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);

  void* q = reinterpret_cast<void*>(0x10);
  EXPECT_EQ(posix_memalign(&q, 0, 8), EINVAL);
  EXPECT_EQ(posix_memalign(&q, 12, 8), EINVAL);
  EXPECT_EQ(posix_memalign(&q, 4, 8), EINVAL);
  EXPECT_EQ(posix_memalign(&q, 48, 8), EINVAL);
  errno = 0;
  EXPECT_EQ(posix_memalign(&q, 64, SIZE_MAX), ENOMEM);
  EXPECT_EQ(errno, 0);
  EXPECT_EQ(q, reinterpret_cast<void*>(0x10));

  errno = 0;
  EXPECT_EQ(aligned_alloc(0, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(aligned_alloc(3, 8), nullptr);
  EXPECT_EQ(errno, EINVAL);

  auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* v = valloc(1);
  EXPECT_TRUE(aligned(v, page));
  free(v);
  void* pv = pvalloc(0);
  EXPECT_TRUE(aligned(pv, page));
  EXPECT_GE(malloc_usable_size(pv), page);
  free(pv);
  pv = pvalloc(page + 1);
  EXPECT_GE(malloc_usable_size(pv), 2 * page);
  free(pv);
  errno = 0;
  EXPECT_EQ(pvalloc(SIZE_MAX - page), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

struct alignas(512) Overaligned {
  unsigned char bytes[700];
};

std::atomic<int> handlerCalls{0};

TEST(EntryPoints, CxxOperators) {
  auto* one = new Overaligned;  // aligned new: size first, then alignment
  EXPECT_TRUE(aligned(one, 512));
  EXPECT_GE(malloc_usable_size(one), sizeof(Overaligned));
  delete one;
  auto* many = new Overaligned[5];
  EXPECT_TRUE(aligned(many, 512));
  delete[] many;
  auto* nothrowOne = new (std::nothrow) Overaligned;
  EXPECT_TRUE(aligned(nothrowOne, 512));
  delete nothrowOne;

  EXPECT_THROW((void)::operator new(SIZE_MAX), std::bad_alloc);
  EXPECT_THROW((void)::operator new[](SIZE_MAX / 2), std::bad_alloc);
  EXPECT_THROW((void)::operator new(SIZE_MAX, std::align_val_t{64}), std::bad_alloc);
  EXPECT_EQ(::operator new(SIZE_MAX, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](SIZE_MAX, std::nothrow), nullptr);
  EXPECT_EQ(::operator new(SIZE_MAX, std::align_val_t{64}, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](SIZE_MAX, std::align_val_t{64}, std::nothrow), nullptr);

  // The new_handler runs on failure; here it gives up after three calls.
  handlerCalls = 0;
  std::set_new_handler([] {
    if (++handlerCalls == 3) std::set_new_handler(nullptr);
  });
  EXPECT_THROW((void)::operator new(SIZE_MAX), std::bad_alloc);
  EXPECT_EQ(handlerCalls.load(), 3);

  void* zero = ::operator new(0);
  EXPECT_NE(zero, nullptr);
  ::operator delete(zero, std::size_t{0});
  void* sized = ::operator new[](100);
  ::operator delete[](sized, std::size_t{100});
  void* alignedSized = ::operator new(100, std::align_val_t{4096});
  EXPECT_TRUE(aligned(alignedSized, 4096));
  ::operator delete(alignedSized, std::size_t{100}, std::align_val_t{4096});
  void* alignedNothrowDelete = ::operator new[](100, std::align_val_t{32});
  ::operator delete[](alignedNothrowDelete, std::align_val_t{32}, std::nothrow);
}

// The dynamic linker and libdl allocate with the process's malloc and free with its free.
TEST(EntryPoints, DynamicLinkerAllocations) {
  for (int round = 0; round < 3; ++round) {
    void* library = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) library = dlopen("libexpat.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr) << dlerror();
    EXPECT_EQ(dlsym(library, "heapkit_no_such_symbol"), nullptr);
    const char* error = dlerror();  // a message libdl allocated with our malloc
    ASSERT_NE(error, nullptr);
    EXPECT_NE(std::string(error).find("heapkit_no_such_symbol"), std::string::npos);
    EXPECT_EQ(dlclose(library), 0);
  }
}

// Producer/consumer: every block is freed by a thread that did not allocate it.
TEST(EntryPoints, CrossThreadFrees) {
  constexpr int kBlocks = 200000;
  std::vector<std::atomic<unsigned char*>> slots(1024);
  std::atomic<bool> done{false};
  std::atomic<long> consumed{0};
  std::thread consumer([&] {
    while (!done.load() || consumed.load() < kBlocks) {
      for (auto& slot : slots) {
        unsigned char* block = slot.exchange(nullptr);
        if (block == nullptr) continue;
        if (block[0] != 0xab || block[malloc_usable_size(block) - 1] != 0xcd) std::abort();
        free(block);
        ++consumed;
      }
    }
  });
  for (int i = 0; i < kBlocks; ++i) {
    std::size_t n = 8 + static_cast<std::size_t>(i * 7919) % 3000;
    auto* block = static_cast<unsigned char*>(malloc(n));
    block[0] = 0xab;
    block[malloc_usable_size(block) - 1] = 0xcd;
    auto& slot = slots[static_cast<std::size_t>(i) % slots.size()];
    unsigned char* expected = nullptr;
    while (!slot.compare_exchange_weak(expected, block)) expected = nullptr;
  }
  done = true;
  consumer.join();
  EXPECT_EQ(consumed.load(), kBlocks);
}

// Threads that exit while holding memory, and whose memory others free afterwards.
TEST(EntryPoints, ManyShortLivedThreads) {
  std::vector<void*> leftovers;
  std::mutex mutex;
  for (int wave = 0; wave < 20; ++wave) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&] {
        std::vector<void*> mine;
        for (int i = 0; i < 500; ++i) mine.push_back(malloc(16 + static_cast<std::size_t>(i) * 13 % 2000));
        for (std::size_t i = 0; i < mine.size(); i += 2) free(mine[i]);
        std::lock_guard<std::mutex> lock(mutex);
        for (std::size_t i = 1; i < mine.size(); i += 2) leftovers.push_back(mine[i]);
      });
    for (std::thread& thread : threads) thread.join();
    for (void* ptr : leftovers) free(ptr);  // the owners are gone
    leftovers.clear();
  }
}

// fork() while other threads allocate: the child must be able to allocate (no lock held
// by a thread that does not exist in the child), run a thread, and exit cleanly.
TEST(EntryPoints, ForkInAThreadedProcess) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int t = 0; t < 3; ++t)
    busy.emplace_back([&] {
      std::vector<void*> blocks(64, nullptr);
      for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        free(blocks[i % 64]);
        blocks[i % 64] = malloc(16 + i % 5000);
      }
      for (void* block : blocks) free(block);
    });
  for (int round = 0; round < 30; ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      alarm(20);  // a deadlocked child fails the test instead of hanging it
      std::vector<void*> blocks;
      for (int i = 0; i < 10000; ++i) blocks.push_back(malloc(static_cast<std::size_t>(i % 700)));
      std::thread helper([] {
        void* p = malloc(12345);
        free(p);
      });
      helper.join();
      for (void* block : blocks) free(block);
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child of fork round " << round << " failed";
  }
  stop = true;
  for (std::thread& thread : busy) thread.join();
}

}  // namespace

namespace {

// Fork handlers the program registered before the process had a second thread, which
// allocate: the library registers its own handlers only then (src/wrapper/wrapper.cpp,
// "fork handlers"), so its prepare handler runs first and holds the allocator's locks
// while these run. They must not deadlock, and the child must allocate normally. Run in a
// fresh process (this binary again), since the test's order of registration needs a
// process whose first thread is still alone.
void* preparedBlock = nullptr;
void* allocatedInPrepare = nullptr;
void allocatingPrepare() {
  void* small = malloc(24);
  // Over the small-object limit: the locked path of every allocator. Served from the
  // 256 KiB bootstrap buffer, which is never reused: a few rounds fit.
  void* large = malloc(40 * 1024);
  void* zeroed = calloc(100, 10);
  void* aligned = nullptr;
  if (posix_memalign(&aligned, 4096, 100) != 0) aligned = nullptr;
  void* moved = realloc(nullptr, 200);
  if (small == nullptr || large == nullptr || zeroed == nullptr || aligned == nullptr || moved == nullptr) _exit(3);
  for (std::size_t i = 0; i < 1000; ++i)
    if (static_cast<unsigned char*>(zeroed)[i] != 0) _exit(4);
  free(small);
  free(large);
  free(zeroed);
  free(aligned);
  free(moved);
  free(preparedBlock);  // a block of the allocator's heap, freed while its locks are held
  preparedBlock = nullptr;
  allocatedInPrepare = malloc(64);
}

int forkWithAllocatingHandlersInAFreshProcess() {
  alarm(20);  // a deadlock fails the test instead of hanging it
  preparedBlock = malloc(std::size_t{1} << 20);
  if (pthread_atfork(allocatingPrepare, nullptr, nullptr) != 0) return 5;
  std::thread([] {
    void* p = malloc(std::size_t{1} << 20);  // the slow path: the library registers now
    free(p);
  }).join();
  for (int round = 0; round < 3; ++round) {
    pid_t child = fork();
    if (child < 0) return 6;
    if (allocatedInPrepare == nullptr) return 10;
    if (child == 0) {
      std::vector<void*> blocks;
      for (int i = 0; i < 1000; ++i) blocks.push_back(malloc(static_cast<std::size_t>(i * 37 % 5000 + 1)));
      for (void* block : blocks) free(block);
      free(allocatedInPrepare);
      _exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 7;
    free(allocatedInPrepare);
    void* after = malloc(std::size_t{1} << 20);  // the parent's locks were released
    if (after == nullptr) return 8;
    free(after);
  }
  return 0;
}

TEST(EntryPoints, ForkHandlersRegisteredEarlierMayAllocate) {
  if (getenv("HEAPKIT_TEST_FRESH_FORK") != nullptr) _exit(forkWithAllocatingHandlersInAFreshProcess());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("HEAPKIT_TEST_FRESH_FORK", "1", 1);
    execl("/proc/self/exe", "entry_points_test", "--gtest_filter=EntryPoints.ForkHandlersRegisteredEarlierMayAllocate",
          static_cast<char*>(nullptr));
    _exit(9);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the fresh process was killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << " (SIGALRM: a fork handler deadlocked)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
