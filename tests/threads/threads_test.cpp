// The thread layers: the model check single-threaded, then the properties threads add:
// no lost or doubled objects under contention, ownership (a block freed by another thread
// goes back to its owner), heaps handed on at thread exit, teardown returns everything.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <new>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "heapkit/building/FreelistHeap.h"
#include "heapkit/general/AdaptiveLeaHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/threads/LockedHeap.h"
#include "heapkit/threads/PHOThreadHeap.h"
#include "heapkit/threads/ScalableHeap.h"
#include "heapkit/threads/ThreadHeap.h"
#include "heapkit/threads/ThreadHeapList.h"
#include "heapkit/objectrep/SizeHeap.h"
#include "heapkit/top/MallocHeap.h"
#include "heapkit/top/MmapHeap.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

using LockedKingsley = LockedHeap<SpinLock, KingsleyHeap<AuditedTop>>;
using LockedLea = LockedHeap<MutexLock, LeaHeap<AuditedTop>>;
using LockedAdaptiveLea = LockedHeap<SpinLock, AdaptiveLeaHeap<AuditedTop>>;  // libheapkit-lea.so
// ThreadHeap moves blocks between its heaps, so they must share one parent: free lists
// over a thread-safe heap that outlives them (separate Kingsley heaps would free chunks
// that a sibling's free list still threads through).
struct SharedParent {
  static constexpr std::size_t Alignment = kMinAlignment;
  static LockedHeap<SpinLock, MallocHeap>& shared() {
    static LockedHeap<SpinLock, MallocHeap> heap;
    return heap;
  }
  void* malloc(std::size_t size) { return shared().malloc(size); }
  void free(void* object) { shared().free(object); }
};
using ThreadKingsley = ThreadHeap<4, LockedHeap<SpinLock, FreelistHeap<SizeHeap<SharedParent>>>>;
using PHOLea = PHOThreadHeap<4, LockedHeap<SpinLock, LeaHeap<AuditedTop>>>;
using Scalable = ScalableHeap<AuditedTop>;

static_assert(FootprintHeap<LockedKingsley> && SizedHeap<LockedLea> && SizeWordHeap<LockedAdaptiveLea> && SizeWordHeap<PHOLea> && FootprintHeap<Scalable>);

template <class H>
class ThreadLayerTest : public ::testing::Test {};
using Layers = ::testing::Types<LockedKingsley, LockedLea, LockedAdaptiveLea, ThreadKingsley, PHOLea, Scalable>;
TYPED_TEST_SUITE(ThreadLayerTest, Layers);

TYPED_TEST(ThreadLayerTest, ModelCheckAndTeardown) {
  std::size_t leftoverBefore = TeardownAudit::leftoverBytes;
  for (const SizeDistribution& sizes : standardDistributions()) {
    SCOPED_TRACE(sizes.name);
    auto heap = std::make_unique<TypeParam>();
    ModelChecker<TypeParam> checker(*heap, 42);
    ModelCheckOptions options;
    options.operations = 4000;
    checker.run(sizes, options);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, leftoverBefore) << "a layer kept memory after destruction";
}

// Threads allocate, fill, check and free blocks, half of them handed to a neighbour thread
// to free: any block given to two owners at once shows up as a corrupted pattern.
TYPED_TEST(ThreadLayerTest, ConcurrentAllocationsNeverOverlap) {
  auto heap = std::make_unique<TypeParam>();
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<std::atomic<void*>> mailbox(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, std::size_t>> mine;
      unsigned seed = 12345u + static_cast<unsigned>(t);
      for (int round = 0; round < kRounds; ++round) {
        seed = seed * 1103515245u + 12345u;
        std::size_t size = 1 + (seed >> 8) % (round % 97 == 0 ? 70000 : 600);
        auto* block = static_cast<unsigned char*>(heap->malloc(size));
        if (block == nullptr) {
          ++failures;
          continue;
        }
        std::memset(block, t + 1, size);
        mine.emplace_back(block, size);
        if (mine.size() > 64 || (seed & 3) == 0) {
          auto [victim, victimSize] = mine[(seed >> 4) % mine.size()];
          mine.erase(mine.begin() + static_cast<long>((seed >> 4) % mine.size()));
          for (std::size_t i = 0; i < victimSize; ++i)
            if (victim[i] != t + 1) {
              ++failures;
              break;
            }
          // Every other block goes to the next thread's mailbox; it frees what it finds.
          if (seed & 8) victim = static_cast<unsigned char*>(mailbox[(t + 1) % kThreads].exchange(victim));
          heap->free(victim);
        }
      }
      for (auto [block, size] : mine) heap->free(block);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (auto& slot : mailbox) heap->free(slot.exchange(nullptr));
  EXPECT_EQ(failures.load(), 0);
}

TEST(PHOThreadHeap, BlockFreedByAnotherThreadReturnsToItsOwner) {
  PHOLea heap;
  std::size_t me = threadIndex() % 4;
  void* block = nullptr;
  // Thread indices are handed out in order, so one of two new threads lands elsewhere.
  for (int attempt = 0; attempt < 2 && (block == nullptr || PHOLea::ownerOf(block) == me); ++attempt) {
    if (block != nullptr) heap.free(block);
    std::thread producer([&] { block = heap.malloc(100); });
    producer.join();
  }
  std::size_t owner = PHOLea::ownerOf(block);
  ASSERT_NE(owner, me);
  std::size_t ownerHeld = heap.heap(owner).bytesHeld();
  heap.free(block);
  EXPECT_EQ(heap.heap(me).bytesHeld(), 0u) << "the freeing thread's heap must not receive the block";
  // Back in the owner's quick list: the owner's next request of that size reuses it.
  void* again = nullptr;
  EXPECT_EQ(heap.heap(owner).bytesHeld(), ownerHeld);
  again = heap.heap(owner).malloc(alignUp(100, kMinAlignment) + 16);  // what PHOThreadHeap asked its heap for
  EXPECT_EQ(static_cast<char*>(again), static_cast<char*>(block) - 16);
  heap.heap(owner).free(again);
}

TEST(ScalableHeap, RemoteFreesReturnToTheOwner) {
  Scalable heap;
  constexpr int kBlocks = 50000;
  std::vector<void*> blocks(kBlocks);
  std::thread producer([&] {
    for (void*& block : blocks) block = heap.malloc(64);
    // The producer keeps running until the consumer has freed everything, then
    // allocates again: it must get its own (remotely freed) blocks back.
  });
  producer.join();
  std::size_t heldAfterProduce = heap.bytesHeld();
  for (void* block : blocks) heap.free(block);  // remote frees: this thread owns nothing
  std::thread reuse([&] {
    // A new thread adopts the producer's heap (handed on at its exit) and collects the
    // remote frees instead of asking the OS for more.
    for (void*& block : blocks) block = heap.malloc(64);
    for (void* block : blocks) heap.free(block);
  });
  reuse.join();
  EXPECT_EQ(heap.bytesHeld(), heldAfterProduce) << "remotely freed blocks were not reused";
}

// The inline paths the malloc wrapper runs first (mallocInline, freeInline): they take
// what the heap's own malloc and free would, pass everything else to `otherwise`, and take
// nothing from a heap not yet constructed (zeroed static storage, as libheapkit.so's).
TEST(ScalableHeap, InlinePathsTakeOnlyTheirOwnAndNothingBeforeConstruction) {
  using Hardened = ScalableHeap<heapkit::Hardened<MmapHeap>>;
  std::size_t passedSize = 0;
  void* passedPointer = nullptr;
  auto mallocOtherwise = [&](std::size_t size) -> void* {
    passedSize = size;
    return nullptr;
  };
  auto freeOtherwise = [&](void* pointer) { passedPointer = pointer; };

  alignas(Hardened) alignas(64) static unsigned char storage[sizeof(Hardened)];  // zero, never constructed
  auto& unconstructed = *std::launder(reinterpret_cast<Hardened*>(storage));
  EXPECT_EQ(unconstructed.mallocInline(16, mallocOtherwise), nullptr);
  EXPECT_EQ(passedSize, 16u) << "a heap not yet constructed took a request";
  alignas(65536) static unsigned char block[2 * 65536];  // zero: what a foreign block may hold
  unconstructed.freeInline(block + 65536 + 4096, freeOtherwise);
  EXPECT_EQ(passedPointer, block + 65536 + 4096);

  Hardened heap;
  void* warm = heap.malloc(32);  // this thread's heap, and a superblock of the class
  passedSize = 0;
  void* object = heap.mallocInline(32, mallocOtherwise);
  ASSERT_NE(object, nullptr) << "the inline path missed a free object";
  EXPECT_EQ(passedSize, 0u);
  for (std::size_t size : {std::size_t{0}, std::size_t{1025}, std::size_t{1} << 20, ~std::size_t{0}}) {
    passedSize = 12345;
    EXPECT_EQ(heap.mallocInline(size, mallocOtherwise), nullptr);
    EXPECT_EQ(passedSize, size) << "size " << size << " was not passed on";
  }
  passedPointer = nullptr;
  heap.freeInline(object, freeOtherwise);
  EXPECT_EQ(passedPointer, nullptr) << "the inline path did not free its own object";
  EXPECT_EQ(heap.mallocInline(32, mallocOtherwise), object) << "the freed object was not reused first";
  for (void* other : {static_cast<void*>(nullptr), static_cast<void*>(static_cast<char*>(object) + 8),
                      static_cast<void*>(block + 65536 + 4096)}) {
    heap.freeInline(other, freeOtherwise);
    EXPECT_EQ(passedPointer, other) << "not passed on: " << other;
  }
  void* large = heap.malloc(1 << 20);
  heap.freeInline(large, freeOtherwise);
  EXPECT_EQ(passedPointer, large) << "a large block took the small-object path";
  heap.free(large);
  heap.free(object);
  heap.free(warm);
}

// The tag of a freed small object is its superblock header's address (Superblock::freedTag),
// which a live object holds only if the program copied a stale one into it. The owner
// finds such an object on no free list and frees it; another thread finds it on no list
// either and leaves it alone (never a false report, never a second listing: a leak of
// one object at worst). A second free is reported, by the owner or by another thread,
// whichever made the first.
TEST(ScalableHeapDeathTest, TaggedLiveObjectsAreFreedAndDoubleFreesReported) {
  using Hardened = ScalableHeap<heapkit::Hardened<MmapHeap>>;
  {
    Hardened heap;
    auto* a = static_cast<std::uint64_t*>(heap.malloc(32));
    auto* b = static_cast<std::uint64_t*>(heap.malloc(32));
    auto* c = static_cast<std::uint64_t*>(heap.malloc(32));
    auto* d = static_cast<std::uint64_t*>(heap.malloc(32));
    a[1] = Hardened::freedTag(a);  // a stale tag, and a link-like word before it
    a[0] = reinterpret_cast<std::uint64_t>(b);
    heap.free(a);
    b[1] = Hardened::freedTag(b);
    b[0] = 12345;
    std::thread([&] { heap.free(b); }).join();  // another thread: not on the remote list
    d[1] = Hardened::freedTag(d);
    d[0] = 0;  // a link-like word (a list's end)
    std::thread([&] { heap.free(d); }).join();  // left alone, not reported
    heap.free(c);
    void* last = heap.malloc(32);
    void* first = heap.malloc(32);
    EXPECT_EQ(last, c) << "the objects freed were not reused first";
    EXPECT_EQ(first, a) << "the objects freed were not reused first";
    heap.free(last);
    heap.free(first);
  }
  auto ownerFreesTwice = [] {
    Hardened heap;
    void* a = heap.malloc(32);
    void* b = heap.malloc(32);
    heap.free(a);
    heap.free(b);
    heap.free(a);
  };
  EXPECT_DEATH(ownerFreesTwice(), "heapkit: free\\(\\): double free of 0x[0-9a-f]+");
  auto anotherThreadFreesTwice = [] {
    Hardened heap;
    void* a = heap.malloc(32);
    void* b = heap.malloc(32);
    heap.free(b);
    std::thread([&] {
      heap.free(a);
      heap.free(a);
    }).join();
  };
  EXPECT_DEATH(anotherThreadFreesTwice(), "heapkit: free\\(\\): double free of 0x[0-9a-f]+");
  auto anotherThreadFreesWhatTheOwnerFreed = [] {
    Hardened heap;
    void* a = heap.malloc(32);
    void* b = heap.malloc(32);
    heap.free(a);
    heap.free(b);
    std::thread([&] { heap.free(a); }).join();
  };
  EXPECT_DEATH(anotherThreadFreesWhatTheOwnerFreed(), "heapkit: free\\(\\): double free of 0x[0-9a-f]+");
  auto ownerFreesWhatAnotherFreed = [] {
    Hardened heap;
    void* a = heap.malloc(32);
    void* b = heap.malloc(32);
    std::thread([&] { heap.free(a); }).join();
    heap.free(b);
    heap.free(a);
  };
  EXPECT_DEATH(ownerFreesWhatAnotherFreed(), "heapkit: free\\(\\): double free of 0x[0-9a-f]+");
}

// Free tokens look random: free's inline path compares one with a word of whatever block
// a foreign pointer lies in, where small integers and -1 are common. Distinct, odd, never
// 0; a thread without a heap has one that is none of these either.
TEST(ThreadHeapRegistry, FreeTokensAreDistinctAndNotSmallIntegers) {
  struct Dummy {
    std::uint64_t freeToken() const { return 0; }
    Dummy* nextFree = nullptr;
    Dummy* nextAll = nullptr;
  };
  using Registry = ThreadHeapRegistry<Dummy>;
  std::vector<std::uint64_t> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back(Registry::newFreeToken());
  for (std::uint64_t token : tokens) {
    EXPECT_GT(token, std::uint64_t{1} << 32) << "a small token";
    EXPECT_NE(token, Registry::kNoFreeToken);
    EXPECT_NE(token, ~std::uint64_t{0});
    EXPECT_EQ(token & 1, 1u);
  }
  EXPECT_GT(Registry::kNoFreeToken, std::uint64_t{1} << 32);
  EXPECT_NE(Registry::kNoFreeToken, ~std::uint64_t{0});
  EXPECT_EQ(Registry::kNoFreeToken & 1, 0u) << "a heap's token could equal it";
  std::sort(tokens.begin(), tokens.end());
  EXPECT_EQ(std::adjacent_find(tokens.begin(), tokens.end()), tokens.end()) << "a token was reused";
}

TEST(ThreadHeapList, ReleasedHeapsAreHandedOnBeforeNewOnesAreMade) {
  struct Heap {
    int made;
    Heap* nextFree = nullptr;
    Heap* nextAll = nullptr;
  };
  std::vector<Heap*> madeHeaps;
  auto create = [&]() -> Heap* {
    madeHeaps.push_back(new Heap{static_cast<int>(madeHeaps.size())});
    return madeHeaps.back();
  };
  ThreadHeapList<Heap, NoLock> heaps;
  Heap* a = heaps.acquire(create);
  Heap* b = heaps.acquire(create);
  ASSERT_NE(a, b);
  heaps.release(a);
  EXPECT_EQ(heaps.acquire(create), a) << "a released heap before a new one";
  EXPECT_EQ(madeHeaps.size(), 2u);
  heaps.release(b);
  heaps.release(a);
  EXPECT_EQ(heaps.acquire(create), a) << "the last released first";
  EXPECT_EQ(heaps.acquire(create), b);
  Heap* c = heaps.acquire(create);
  EXPECT_EQ(madeHeaps.size(), 3u);
  auto failing = []() -> Heap* { return nullptr; };
  EXPECT_EQ(heaps.acquire(failing), nullptr) << "none free and none made";

  std::vector<Heap*> visited;
  heaps.takeAll([&](Heap* heap) { visited.push_back(heap); });
  std::sort(visited.begin(), visited.end());
  std::vector<Heap*> expected{a, b, c};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(visited, expected) << "every heap made, once";
  EXPECT_EQ(heaps.first(), nullptr) << "the owner took them all";
  heaps.takeAll([&](Heap*) { ADD_FAILURE() << "the list is empty"; });
  for (Heap* heap : madeHeaps) delete heap;
}

TEST(ScalableHeap, ThreadExitReturnsFreeSuperblocksToThePool) {
  Scalable heap;
  std::size_t pooledBefore;
  {
    void* warm = heap.malloc(16);  // creates the first arena
    heap.free(warm);
    pooledBefore = heap.pooledSuperblocks();
  }
  std::thread worker([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 20000; ++i) blocks.push_back(heap.malloc(200));
    for (void* block : blocks) heap.free(block);
  });
  worker.join();
  // The worker needed a second arena; once it exits, every superblock it used is free
  // again, its current ones included (handed back by the thread-exit hook).
  EXPECT_EQ(heap.pooledSuperblocks(), pooledBefore + segment::kSlices);
}

TEST(ScalableHeap, ManyShortLivedThreadsReuseHeaps) {
  Scalable heap;
  for (int round = 0; round < 200; ++round) {
    std::thread worker([&] {
      void* block = heap.malloc(1000);
      std::memset(block, 1, 1000);
      heap.free(block);
    });
    worker.join();
  }
  // 200 threads, one at a time: one heap's worth of memory, not 200.
  EXPECT_LT(heap.bytesHeld(), std::size_t{16} << 20);
}

TEST(ScalableHeap, MemalignAndInteriorPointers) {
  Scalable heap;
  for (std::size_t alignment = 32; alignment <= (std::size_t{1} << 20); alignment *= 2) {
    for (std::size_t size : {std::size_t{1}, std::size_t{100}, std::size_t{5000}, std::size_t{40000}, std::size_t{300000}}) {
      void* block = heap.memalign(alignment, size);
      ASSERT_NE(block, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block) % alignment, 0u) << alignment;
      EXPECT_GE(heap.getSize(block), size);
      std::memset(block, 0xab, size);
      heap.free(block);
    }
  }
  EXPECT_EQ(heap.memalign(48, 10), nullptr) << "not a power of two";
  EXPECT_EQ(heap.malloc(SIZE_MAX), nullptr);
  EXPECT_EQ(heap.memalign(64, SIZE_MAX - 100), nullptr);
}

// Counts what ScalableHeap asks its Top for.
class CountingTop : public AuditedTop {
 public:
  static inline std::size_t requests = 0;
  void* malloc(std::size_t size) {
    ++requests;
    return AuditedTop::malloc(size);
  }
};

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Blocks over 1 MiB go to the large-block cache (by default only those over 32 MiB do).
ScalableCoreConfig cacheFromOneMiB() {
  ScalableCoreConfig config;
  config.large.spanMaxBytes = kMiB;
  return config;
}

// A loop of buffers (Python's bytes, I/O buffers): after the first, each request reuses
// the block just freed instead of asking Top again, medium blocks (spans of a segment)
// and large ones (blocks of Top, kept by the cache) alike.
TEST(ScalableHeap, FreedLargeBlocksAreReused) {
  ScalableHeap<CountingTop> heap;
  for (std::size_t base : {std::size_t{90000}, 3 * kMiB}) {
    void* first = heap.malloc(base + 10000);
    std::memset(first, 1, base + 10000);
    heap.free(first);
    std::size_t held = heap.bytesHeld();
    std::size_t requests = CountingTop::requests;
    for (int i = 0; i < 100; ++i) {
      void* block = heap.malloc(base + 100 * i);
      EXPECT_EQ(block, first) << base << " " << i;
      EXPECT_EQ(CountingTop::requests, requests) << base << " " << i;
      EXPECT_GE(heap.getSize(block), std::size_t(base + 100 * i));
      std::memset(block, 2, base + 100 * i);
      heap.free(block);
    }
    EXPECT_EQ(heap.bytesHeld(), held);
  }
  // Aligned requests reuse freed blocks too, and get their alignment.
  void* aligned = heap.memalign(std::size_t{1} << 16, 70000);
  heap.free(aligned);
  std::size_t requests = CountingTop::requests;
  for (std::size_t alignment : {std::size_t{1} << 16, std::size_t{1} << 12, std::size_t{1} << 16}) {
    void* block = heap.memalign(alignment, 70000);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block) % alignment, 0u);
    EXPECT_EQ(CountingTop::requests, requests);
    EXPECT_GE(heap.getSize(block), 70000u);
    std::memset(block, 6, heap.getSize(block));
    heap.free(block);
  }
}

// The 5-25 MiB pattern: a freed big block serves a smaller request, as glibc serves it
// from freed heap space, but not one more than fitSlack (4) times smaller, which would
// keep most of its pages resident for nothing.
TEST(ScalableHeap, CachedBlocksServeRequestsUpToFitSlackSmaller) {
  ScalableHeap<CountingTop> heap(cacheFromOneMiB());
  void* big = heap.malloc(20 * kMiB);
  std::memset(big, 3, 20 * kMiB);
  heap.free(big);
  EXPECT_EQ(heap.largeCacheBlocks(), 1u);
  std::size_t requests = CountingTop::requests;
  void* smaller = heap.malloc(6 * kMiB);
  EXPECT_EQ(smaller, big);
  EXPECT_EQ(CountingTop::requests, requests);
  EXPECT_GE(heap.getSize(smaller), 20 * kMiB) << "a cached block is handed out whole";
  std::memset(smaller, 4, heap.getSize(smaller));
  heap.free(smaller);
  void* small = heap.malloc(2 * kMiB);
  EXPECT_NE(small, big) << "10 times the request";
  EXPECT_EQ(CountingTop::requests, requests + 1);
  EXPECT_EQ(heap.largeCacheBlocks(), 1u);
  heap.free(small);
}

// The budget is twice the biggest block freed recently, 4 to 64 MiB, and at most
// cache.maxObjects blocks; blocks over 64 MiB are never kept.
TEST(ScalableHeap, LargeCacheBudgetFollowsTheBiggestRecentBlocks) {
  ScalableHeap<CountingTop> heap(cacheFromOneMiB());
  heap.free(heap.malloc(10 * kMiB));  // the budget is 20 MiB
  std::vector<void*> blocks;
  for (int i = 0; i < 60; ++i) blocks.push_back(heap.malloc(1200 * 1024));
  for (void* block : blocks) heap.free(block);
  EXPECT_EQ(heap.largeCacheBlocks(), ScalableCoreConfig{}.cache.maxObjects);
  blocks.clear();
  for (int i = 0; i < 6; ++i) blocks.push_back(heap.malloc(10 * kMiB));
  std::size_t withAll = heap.bytesHeld();
  for (void* block : blocks) heap.free(block);
  EXPECT_EQ(heap.largeCacheBlocks(), 2u) << "a budget of two 10 MiB blocks";
  EXPECT_GE(heap.largeCacheBytes(), 20 * kMiB);
  EXPECT_LE(heap.largeCacheBytes(), 2 * (10 * kMiB + 128 * 1024));
  EXPECT_LE(heap.bytesHeld(), withAll - 4 * 10 * kMiB);
  blocks.clear();
  for (int i = 0; i < 6; ++i) blocks.push_back(heap.malloc(30 * kMiB));
  for (void* block : blocks) heap.free(block);
  EXPECT_EQ(heap.largeCacheBlocks(), 2u) << "a budget of two 30 MiB blocks, capped at 64 MiB";
  EXPECT_LE(heap.largeCacheBytes(), ScalableCoreConfig{}.large.cacheMaxBytes);
  std::size_t before = heap.bytesHeld();
  void* huge = heap.malloc(70 * kMiB);
  heap.free(huge);
  EXPECT_EQ(heap.bytesHeld(), before) << "a block over the budget's cap is not kept";
  EXPECT_EQ(heap.largeCacheBlocks(), 2u);
}

// A cached block that no request reused within the delay (counted in large mallocs and
// frees) goes back to the OS, though it is within the budget.
TEST(ScalableHeap, IdleLargeBlocksGoBackAfterTheDelay) {
  ScalableHeap<CountingTop> heap(cacheFromOneMiB());
  void* idle = heap.malloc(3 * kMiB);
  void* busy = heap.malloc(3 * kMiB / 2);
  heap.free(idle);
  heap.free(busy);  // one operation after `idle` was freed
  ASSERT_EQ(heap.largeCacheBlocks(), 2u);
  std::size_t held = heap.bytesHeld();
  std::uint64_t operations = 1;
  std::uint64_t delay = ScalableCoreConfig{}.cache.idleOperations;
  while (heap.largeCacheBlocks() == 2 && operations < 10 * delay) {
    void* block = heap.malloc(3 * kMiB / 2);  // the smaller block fits best
    EXPECT_EQ(block, busy);
    heap.free(block);
    operations += 2;
  }
  EXPECT_GT(operations, delay - 2);
  EXPECT_LE(operations, delay + 2);
  EXPECT_EQ(heap.largeCacheBlocks(), 1u);
  EXPECT_LE(heap.bytesHeld(), held - 3 * kMiB);
}

// The budget follows the biggest block freed within the delay, and forgets older ones.
TEST(ScalableHeap, LargeCacheBudgetForgetsOldBlocks) {
  ScalableHeap<CountingTop> heap(cacheFromOneMiB());
  void* big = heap.malloc(10 * kMiB);
  void* busy = heap.malloc(3 * kMiB / 2);
  heap.free(big);  // the budget is 20 MiB now
  heap.free(busy);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(heap.malloc(5 * kMiB / 4));
  for (void* block : blocks) heap.free(block);
  EXPECT_GT(heap.largeCacheBytes(), 4 * kMiB) << "within the 20 MiB budget";
  for (std::uint64_t i = 0; i < ScalableCoreConfig{}.cache.idleOperations; ++i) heap.free(heap.malloc(3 * kMiB / 2));
  blocks.clear();
  for (int i = 0; i < 4; ++i) blocks.push_back(heap.malloc(5 * kMiB / 4));
  for (void* block : blocks) heap.free(block);
  EXPECT_LE(heap.largeCacheBytes(), ScalableCoreConfig{}.large.cacheMinBytes) << "10 MiB was freed too long ago to count";
}

// Blocks of 5-25 MiB, two live, replaced in a loop (bench-malloc's bigblocks): they are
// spans, and a freed one serves the next request that fits (the rest of its segment stays
// free); segments are sized to a power of two, so a segment freed serves a somewhat
// bigger block next. Few segments are ever mapped, and the free pages kept stay within
// the budget.
TEST(ScalableHeap, SpansOfMegabytesAreReused) {
  ScalableHeap<CountingTop> heap;
  std::vector<void*> blocks(2, nullptr);
  std::mt19937_64 rng(9);
  std::size_t requests = CountingTop::requests;
  for (int round = 0; round < 300; ++round) {
    std::size_t victim = rng() % 2;
    heap.free(blocks[victim]);
    std::size_t size = 5 * kMiB + rng() % (20 * kMiB);
    blocks[victim] = heap.malloc(size);
    ASSERT_NE(blocks[victim], nullptr);
    ASSERT_GE(heap.getSize(blocks[victim]), size);
    for (std::size_t offset = 0; offset < size; offset += 4096) static_cast<char*>(blocks[victim])[offset] = 1;
    ASSERT_LE(heap.residentFreeBytes(), ScalableCoreConfig{}.segments.maxResidentFreeBytes);
  }
  EXPECT_LE(CountingTop::requests - requests, 6u) << "segments mapped for 300 blocks";
  EXPECT_EQ(heap.largeCacheBlocks(), 0u) << "spans, not the cache";
  for (void* block : blocks) heap.free(block);
}

// The producer/consumer pattern: records just over the small-object limit (32,776
// bytes) made by one thread and freed by another, about 100 in flight. Freed records'
// spans go back to the segments whichever thread frees them, and the producer reuses
// them: after the first records, no request reaches Top.
TEST(ScalableHeap, MediumBlocksPassedBetweenThreadsReuseSpans) {
  ScalableHeap<CountingTop> heap;
  constexpr int kRecords = 20000, kInFlight = 100;
  std::vector<std::atomic<void*>> ring(kInFlight);
  std::atomic<int> produced{0}, consumed{0};
  std::atomic<std::size_t> requestsAfterWarmUp{0};
  std::atomic<int> failures{0};
  std::thread producer([&] {
    for (int i = 0; i < kRecords; ++i) {
      while (produced.load() - consumed.load() >= kInFlight) std::this_thread::yield();
      auto* record = static_cast<unsigned char*>(heap.malloc(32776));
      if (record == nullptr) {
        ++failures;
        return;
      }
      std::memset(record, i & 0xff, 32776);
      if (i == 4 * kInFlight) requestsAfterWarmUp = CountingTop::requests;
      ring[i % kInFlight].store(record);
      produced.store(i + 1);
    }
  });
  std::thread consumer([&] {
    for (int i = 0; i < kRecords; ++i) {
      while (consumed.load() >= produced.load()) std::this_thread::yield();
      auto* record = static_cast<unsigned char*>(ring[i % kInFlight].exchange(nullptr));
      if (record[0] != (i & 0xff) || record[32775] != (i & 0xff)) ++failures;
      heap.free(record);
      consumed.store(i + 1);
    }
  });
  producer.join();
  consumer.join();
  EXPECT_EQ(failures.load(), 0);
  // Spans are reused: the 19,600 records after the warm-up take no request to Top each (one
  // each before spans), at most a segment more when the threads' interleaving puts more
  // records in flight than during the warm-up (seen once in a loaded sanitizer run).
  EXPECT_LE(CountingTop::requests - requestsAfterWarmUp.load(), 1u) << "records went to Top";
}

// A thread's medium blocks are spans of its own segments (threads/OwnedSpanHeap.h): a
// freed block's span is reused by its next request, blocks over kMaxBytes or aligned go
// to the shared layers, and a heap whose blocks are all freed has every slice free.
TEST(ScalableHeap, ThreadsServeMediumBlocksFromTheirOwnSegments) {
  using Heap = ScalableHeap<CountingTop>;
  Heap heap;
  heap.free(heap.malloc(16));  // this thread has a heap
  EXPECT_EQ(heap.ownedSpanSegments(), 0u);
  void* first = heap.malloc(200000);
  std::memset(first, 1, 200000);
  EXPECT_EQ(heap.ownedSpanSegments(), 1u);
  heap.free(first);
  EXPECT_EQ(heap.ownedFreeSlices(), segment::kSlices) << "the span went back at once";
  void* again = heap.malloc(150000);
  EXPECT_EQ(again, first) << "reused";
  void* huge = heap.malloc(heap.ownedSpanMaxBytes() + 1);
  void* aligned = heap.memalign(128 * 1024, 100000);
  EXPECT_EQ(heap.ownedSpanSegments(), 1u) << "larger and aligned blocks are the shared layers'";
  EXPECT_EQ(Superblock::of(huge)->owner, nullptr);
  EXPECT_EQ(Superblock::of(aligned)->owner, nullptr);
  EXPECT_NE(Superblock::of(again)->owner, nullptr) << "a thread's own block names its heap";
  std::size_t freeBefore = heap.ownedFreeSlices();
  void* biggest = heap.malloc(heap.ownedSpanMaxBytes());
  std::memset(biggest, 3, heap.ownedSpanMaxBytes());
  EXPECT_LT(heap.ownedFreeSlices(), freeBefore) << "the largest owned block";
  heap.free(huge);
  heap.free(aligned);
  heap.free(again);
  heap.free(biggest);
  EXPECT_EQ(heap.ownedFreeSlices(), heap.ownedSpanSegments() * segment::kSlices);
}

// With ownedSpanMaxBytes at its most, a thread's segments serve blocks up to an ordinary
// segment's 63 slices: the largest fills a segment of its own.
TEST(ScalableHeap, TheLargestOwnedBlockFillsASegment) {
  using Heap = ScalableHeap<CountingTop>;
  ScalableCoreConfig config;
  config.ownedSpanMaxBytes = SIZE_MAX;
  Heap heap(config);
  EXPECT_EQ(heap.ownedSpanMaxBytes(), Heap::OwnedSpansMaxBytes);
  void* small = heap.malloc(100000);
  void* biggest = heap.malloc(Heap::OwnedSpansMaxBytes);
  std::memset(biggest, 3, Heap::OwnedSpansMaxBytes);
  EXPECT_EQ(heap.ownedSpanSegments(), 2u);
  EXPECT_EQ(heap.ownedFreeSlices(), segment::kSlices - 2) << "the first segment less the small block";
  heap.free(biggest);
  heap.free(small);
  EXPECT_EQ(heap.ownedFreeSlices(), heap.ownedSpanSegments() * segment::kSlices);
}

// Two threads allocate medium blocks and each frees half of them on the other thread,
// through a shared table (bench-malloc's mixedstress), at random sizes: no block is handed
// out while another live block overlaps it, each keeps what was written into it, the
// remote frees are taken back by their owner (every slice free at the end, nothing left on
// the remote lists), and spans are reused (a few segments for 20,000 blocks).
TEST(ScalableHeap, MediumBlocksFreedByTheOtherThreadAreReusedByTheirOwner) {
  ScalableHeap<CountingTop> heap;
  constexpr int kRounds = 10000, kLive = 6, kSlots = 16;
  std::vector<std::atomic<void*>> table(kSlots);
  std::mutex liveLock;
  std::map<std::uintptr_t, std::size_t> live;  // every block handed out and not yet freed
  std::atomic<int> failures{0};
  std::barrier sync(2);
  auto handedOut = [&](void* block, std::size_t size) {
    auto start = reinterpret_cast<std::uintptr_t>(block);
    std::lock_guard<std::mutex> guard(liveLock);
    auto next = live.lower_bound(start);
    if (next != live.end() && next->first < start + size) ++failures;
    if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > start) ++failures;
    live.emplace(start, size);
  };
  auto freeChecked = [&](void* block) {
    auto* bytes = static_cast<unsigned char*>(block);
    std::size_t size;
    std::memcpy(&size, bytes, sizeof size);
    if (bytes[size - 1] != static_cast<unsigned char>(size)) ++failures;
    {
      std::lock_guard<std::mutex> guard(liveLock);
      if (live.erase(reinterpret_cast<std::uintptr_t>(block)) != 1) ++failures;
    }
    heap.free(block);
  };
  std::vector<std::size_t> segments(2), freeSlices(2);
  std::vector<int> waiting(2);  // not vector<bool>: each thread writes its own element
  auto worker = [&](unsigned seed, int index) {
    std::mt19937 random(seed);
    std::vector<void*> mine(kLive, nullptr);
    for (int round = 0; round < kRounds; ++round) {
      std::size_t victim = random() % kLive;
      if (mine[victim] != nullptr) freeChecked(mine[victim]);
      std::size_t size = 40000 + random() % 600000;
      auto* block = static_cast<unsigned char*>(heap.malloc(size));
      if (block == nullptr) {
        ++failures;
        return;
      }
      handedOut(block, size);
      std::memcpy(block, &size, sizeof size);
      block[size - 1] = static_cast<unsigned char>(size);
      mine[victim] = block;
      if (random() % 2 == 0) mine[victim] = table[random() % kSlots].exchange(mine[victim]);
    }
    for (void* block : mine)
      if (block != nullptr) freeChecked(block);
    sync.arrive_and_wait();
    if (index == 0)
      for (auto& slot : table)
        if (void* block = slot.exchange(nullptr)) freeChecked(block);
    sync.arrive_and_wait();  // no remote free comes after this
    heap.free(heap.malloc(100000));  // takes the remote frees back
    segments[index] = heap.ownedSpanSegments();
    freeSlices[index] = heap.ownedFreeSlices();
    waiting[index] = heap.ownedRemoteFreesWaiting();
  };
  std::thread first(worker, 1u, 0), second(worker, 2u, 1);
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(live.empty());
  for (int index = 0; index < 2; ++index) {
    EXPECT_GE(segments[index], 1u);
    EXPECT_LE(segments[index], 4u) << "spans reused";
    EXPECT_EQ(freeSlices[index], segments[index] * segment::kSlices) << "every block went back";
    EXPECT_FALSE(waiting[index]);
  }
}

// calloc on a reused span clears what the block held.
TEST(ScalableHeap, CallocOnAReusedSpanClearsIt) {
  ANSIWrapper<ScalableHeap<MmapHeap>> heap;
  heap.free(heap.malloc(16));
  auto* dirty = static_cast<unsigned char*>(heap.malloc(200000));
  std::memset(dirty, 0xA5, 200000);
  heap.free(dirty);
  auto* clean = static_cast<unsigned char*>(heap.calloc(1, 190000));
  ASSERT_EQ(clean, dirty) << "the span reused";
  for (std::size_t i = 0; i < 190000; ++i) ASSERT_EQ(clean[i], 0) << i;
  heap.free(clean);
}

// Another thread's frees of this thread's medium blocks wait on its remote list, take no
// slice back on their own, and go back at this thread's next medium malloc, which reuses
// their spans.
TEST(ScalableHeap, RemoteFreesOfMediumBlocksWaitForTheirOwner) {
  ScalableHeap<CountingTop> heap;
  std::vector<void*> mine;
  for (int i = 0; i < 4; ++i) mine.push_back(heap.malloc(100000));
  std::size_t freeBefore = heap.ownedFreeSlices();
  std::thread other([&] {
    for (void* block : mine) heap.free(block);
    EXPECT_EQ(heap.ownedSpanSegments(), 0u) << "the freeing thread's heap has none of them";
  });
  other.join();
  EXPECT_TRUE(heap.ownedRemoteFreesWaiting());
  EXPECT_EQ(heap.ownedFreeSlices(), freeBefore);
  void* again = heap.malloc(100000);
  EXPECT_FALSE(heap.ownedRemoteFreesWaiting());
  EXPECT_TRUE(std::find(mine.begin(), mine.end(), again) != mine.end()) << "a span freed remotely, reused";
  heap.free(again);
  EXPECT_EQ(heap.ownedFreeSlices(), heap.ownedSpanSegments() * segment::kSlices);
}

// Two threads replace buffers of 16-256 KiB, and a quarter of the time swap one with the
// other thread: blocks freed by either thread, whichever allocated them, keep their
// contents, and no block is handed out twice.
TEST(ScalableHeap, MediumBlocksSwappedBetweenThreads) {
  TeardownAudit::leftoverBytes = 0;
  {
    Scalable heap;
    constexpr int kThreads = 2, kRounds = 20000;
    std::vector<std::atomic<void*>> swap(4);
    std::atomic<int> failures{0};
    auto stamp = [](void* block, std::size_t size) {
      std::memcpy(block, &size, sizeof size);
      for (std::size_t offset = sizeof size; offset < size - 1; offset += 4096) static_cast<unsigned char*>(block)[offset] = static_cast<unsigned char>(size);
      static_cast<unsigned char*>(block)[size - 1] = static_cast<unsigned char>(size >> 8);
    };
    auto intact = [](void* block) {
      std::size_t size;
      std::memcpy(&size, block, sizeof size);
      for (std::size_t offset = sizeof size; offset < size - 1; offset += 4096)
        if (static_cast<unsigned char*>(block)[offset] != static_cast<unsigned char>(size)) return false;
      return static_cast<unsigned char*>(block)[size - 1] == static_cast<unsigned char>(size >> 8);
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(77 + t);
        std::vector<void*> mine(4, nullptr);
        for (int round = 0; round < kRounds; ++round) {
          std::size_t victim = rng() % mine.size();
          if (mine[victim] != nullptr) {
            if (!intact(mine[victim])) ++failures;
            heap.free(mine[victim]);
          }
          std::size_t size = 16 * 1024 + rng() % (240 * 1024);
          mine[victim] = heap.malloc(size);
          if (mine[victim] == nullptr || heap.getSize(mine[victim]) < size) {
            ++failures;
            return;
          }
          stamp(mine[victim], size);
          if (rng() % 4 == 0) mine[victim] = swap[rng() % swap.size()].exchange(mine[victim]);
        }
        for (void* block : mine) {
          if (block != nullptr && !intact(block)) ++failures;
          heap.free(block);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (auto& slot : swap) {
      void* block = slot.exchange(nullptr);
      if (block != nullptr && !intact(block)) ++failures;
      heap.free(block);
    }
    EXPECT_EQ(failures.load(), 0);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

TEST(ScalableHeap, DestructionReturnsCachedLargeBlocks) {
  TeardownAudit::leftoverBytes = 0;
  {
    Scalable heap(cacheFromOneMiB());
    std::vector<void*> blocks;
    for (std::size_t i = 1; i <= 6; ++i) blocks.push_back(heap.malloc(i * 3 * kMiB));
    void* live = heap.malloc(7 * kMiB);  // never freed: the destructor returns it too
    std::memset(live, 1, 7 * kMiB);
    for (void* block : blocks) heap.free(block);
    EXPECT_GT(heap.largeCacheBytes(), 0u);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

// Threads allocate, write and free large blocks of many sizes, half of them freed by
// another thread; every block keeps its contents and the cache stays within its bound.
TEST(ScalableHeap, LargeBlocksFromManyThreads) {
  TeardownAudit::leftoverBytes = 0;
  {
    Scalable heap;
    constexpr int kThreads = 4, kRounds = 300;
    std::vector<std::atomic<void*>> handoff(kThreads);
    std::atomic<int> failures{0};
    auto stamp = [](void* block, std::size_t size, unsigned char tag) {
      for (std::size_t offset = 0; offset < size; offset += 16384) static_cast<unsigned char*>(block)[offset] = tag;
      static_cast<unsigned char*>(block)[size - 1] = tag;
    };
    auto intact = [](void* block, std::size_t size, unsigned char tag) {
      for (std::size_t offset = 0; offset < size; offset += 16384)
        if (static_cast<unsigned char*>(block)[offset] != tag) return false;
      return static_cast<unsigned char*>(block)[size - 1] == tag;
    };
    struct Header {
      std::size_t size;
      unsigned char tag;
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(t + 1);
        for (int round = 0; round < kRounds; ++round) {
          std::size_t size = std::size_t{40000} + rng() % (rng() % 4 == 0 ? 12 * kMiB : 600 * 1024);
          auto tag = static_cast<unsigned char>(rng() | 1);
          void* block = heap.malloc(size);
          if (block == nullptr || heap.getSize(block) < size) {
            ++failures;
            continue;
          }
          stamp(block, size, tag);
          new (block) Header{size, tag};
          void* other = handoff[(t + 1) % kThreads].exchange(block);
          if (other != nullptr) {
            Header header = *static_cast<Header*>(other);
            if (!intact(static_cast<char*>(other) + 16384, header.size - 16384, header.tag)) ++failures;
            heap.free(other);
          }
        }
      });
    for (std::thread& thread : threads) thread.join();
    for (auto& slot : handoff) heap.free(slot.exchange(nullptr));
    EXPECT_EQ(failures, 0);
    EXPECT_LE(heap.largeCacheBytes(), ScalableCoreConfig{}.large.cacheMaxBytes);
    EXPECT_LE(heap.largeCacheBlocks(), ScalableCoreConfig{}.cache.maxObjects);
    EXPECT_LE(heap.residentFreeBytes(), ScalableCoreConfig{}.segments.maxResidentFreeBytes);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

// The model check with blocks of megabytes: reused blocks (bigger than the request, or
// partly given back) must keep every object intact and cover getSize.
TEST(ScalableHeap, ModelCheckOfBigBlocks) {
  TeardownAudit::leftoverBytes = 0;
  {
    Scalable heap;
    ModelChecker<Scalable> checker(heap, 5);
    SizeDistribution big{"big", [](std::mt19937_64& rng) {
                           return rng() % 3 == 0 ? std::uniform_int_distribution<std::size_t>(33 * 1024, 2 * kMiB)(rng)
                                                 : std::uniform_int_distribution<std::size_t>(2 * kMiB, 12 * kMiB)(rng);
                         }};
    ModelCheckOptions options;
    options.operations = 200;
    options.maxLiveObjects = 4;
    checker.run(big, options);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

// The owner takes a remote list whole (walk, then splice): every block must be counted,
// or the superblocks never empty and never return to the pool.
TEST(ScalableHeap, RemoteListsSplicedWholeKeepTheCounts) {
  Scalable heap;
  std::atomic<int> phase{0};
  std::vector<void*> blocks(30000);
  std::size_t pooledBefore = 0;
  std::thread owner([&] {
    void* warm = heap.malloc(16);  // the first arena
    heap.free(warm);
    heap.releaseThisThreadsHeap();  // every superblock is in the pool now
    pooledBefore = heap.pooledSuperblocks();
    for (void*& block : blocks) block = heap.malloc(48);
    phase = 1;
    while (phase != 2) std::this_thread::yield();
    // Everything came back remotely; allocating again collects the lists, and freeing
    // it all locally, then releasing the heap, must give every superblock back.
    for (void*& block : blocks) block = heap.malloc(48);
    for (void* block : blocks) heap.free(block);
    heap.releaseThisThreadsHeap();
  });
  while (phase != 1) std::this_thread::yield();
  for (void* block : blocks) heap.free(block);  // remote: this thread owns none of them
  phase = 2;
  owner.join();
  EXPECT_EQ(heap.pooledSuperblocks(), pooledBefore) << "a superblock kept a stale count of blocks in use";
}

// memalign's interior pointers and large blocks leave the free fast path through the
// header's flags, from the owner and from other threads alike.
TEST(ScalableHeap, FlaggedSuperblocksFreedLocallyAndRemotely) {
  Scalable heap;
  std::vector<void*> local, remote;
  for (int i = 0; i < 2000; ++i) {
    std::size_t alignment = std::size_t{32} << (i % 6);
    void* block = i % 3 == 0 ? heap.malloc(40000 + i) : heap.memalign(alignment, 24 + i % 500);
    ASSERT_NE(block, nullptr);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(block) % (i % 3 == 0 ? kMinAlignment : alignment), 0u);
    std::memset(block, i & 0xff, 24);
    (i % 2 == 0 ? local : remote).push_back(block);
  }
  std::thread other([&] {
    for (void* block : remote) heap.free(block);
  });
  for (void* block : local) heap.free(block);
  other.join();
  heap.releaseThisThreadsHeap();
  void* again = heap.memalign(64, 100);  // the heap still works after all of it
  ASSERT_NE(again, nullptr);
  heap.free(again);
}

// Requests up to 1 KiB find their superblock through the heap's direct table, larger
// ones through the class table: both must give an object of the request's class, and a
// class whose superblocks are exhausted and retired must get a fresh one.
TEST(ScalableHeap, EverySizeGetsItsClass) {
  Scalable heap;
  std::size_t pooledBefore = 0;
  {
    void* warm = heap.malloc(16);
    heap.free(warm);
    heap.releaseThisThreadsHeap();
    pooledBefore = heap.pooledSuperblocks();
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<void*> blocks;
    for (std::size_t size = 1; size <= 4096; size += size < 1100 ? 1 : 61) {
      for (int copy = 0; copy < 3; ++copy) {
        void* block = heap.malloc(size);
        ASSERT_NE(block, nullptr);
        ASSERT_EQ(heap.getSize(block), ScalableSizeClasses::bytesOf(ScalableSizeClasses::classOf(size))) << size;
        std::memset(block, static_cast<int>(size), size);
        blocks.push_back(block);
      }
    }
    for (void* block : blocks) heap.free(block);
  }
  heap.releaseThisThreadsHeap();
  EXPECT_EQ(heap.pooledSuperblocks(), pooledBefore);
}

// A thread that uses two instances switches its cached heap between them; each free
// must reach the instance and superblock the object came from. An instance destroyed
// while the thread still caches its heap, and a new one built at the same address, must
// not take the old heap's frees for its own (free tokens are never reused).
TEST(ScalableHeap, OneThreadTwoInstancesAndAReplacedOne) {
  Scalable first;
  alignas(Scalable) unsigned char storage[sizeof(Scalable)];
  for (int generation = 0; generation < 3; ++generation) {
    auto* second = new (storage) Scalable();
    std::vector<void*> fromFirst, fromSecond;
    for (int i = 0; i < 3000; ++i) {
      fromFirst.push_back(first.malloc(16 + i % 700));
      fromSecond.push_back(second->malloc(16 + i % 700));
    }
    for (int i = 0; i < 3000; ++i) {
      first.free(fromFirst[i]);
      second->free(fromSecond[i]);
    }
    second->releaseThisThreadsHeap();
    std::size_t pooled = second->pooledSuperblocks();
    EXPECT_EQ(pooled, segment::kSlices) << "every superblock of the second instance came back";
    void* last = second->malloc(32);  // this thread now caches the second instance's heap
    second->free(last);
    second->~Scalable();
  }
  first.releaseThisThreadsHeap();
  EXPECT_EQ(first.pooledSuperblocks(), segment::kSlices);
}

TEST(ScalableHeap, SizeClasses) {
  for (std::size_t size = 1; size <= ScalableSizeClasses::maxBytes(); ++size) {
    std::size_t sizeClass = ScalableSizeClasses::classOf(size);
    ASSERT_LT(sizeClass, ScalableSizeClasses::kMaxClasses);
    ASSERT_GE(ScalableSizeClasses::bytesOf(sizeClass), size);
    if (sizeClass > 0) {
      ASSERT_LT(ScalableSizeClasses::bytesOf(sizeClass - 1), size);
    }
    ASSERT_EQ(ScalableSizeClasses::bytesOf(sizeClass) % kMinAlignment, 0u);
  }
}

}  // namespace
}  // namespace heapkit::testing
