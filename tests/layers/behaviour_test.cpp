// Each layer's own behaviour, beyond what the model check sees.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "heapkit/heapkit.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

// --- null propagation: a failing parent never causes a write through null ----------

template <class H>
class NullPropagation : public ::testing::Test {};
template <class Parent>
using DLListBin = AdaptHeap<DLList, Parent>;
using OverFailingTop = ::testing::Types<
    SizeHeap<FailingTop>, FreelistHeap<SizeHeap<FailingTop>>, BoundedFreelistHeap<4, SizeHeap<FailingTop>>,
    ChunkHeap<4096, FailingTop>, AdaptHeap<SLList, SizeHeap<FailingTop>>, CoalesceableHeap<4096, FailingTop>,
    CoalesceHeap<AdaptHeap<DLList, CoalesceableHeap<4096, FailingTop>>>,
    StrictSegHeap<kingsley::Classes, FreelistHeap, SizeHeap<FailingTop>>,
    SegHeap<kingsley::UnboundedClasses, DLListBin, SizeHeap<FailingTop>>,
    ThresholdHeap<4096, SizeHeap<FailingTop>>, QuickListHeap<128, SizeHeap<FailingTop>>, DebugHeap<4, SizeHeap<FailingTop>>,
    ProfileHeap<SizeHeap<FailingTop>>, KingsleyHeap<FailingTop>, CoalescingKingsleyHeap<FailingTop>, LeaCoreHeap<FailingTop>,
    AdaptiveThresholdHeap<4096, SizeHeap<FailingTop>>, AdaptiveLeaCoreHeap<FailingTop>>;
TYPED_TEST_SUITE(NullPropagation, OverFailingTop);

TYPED_TEST(NullPropagation, MallocReturnsNullWhenTheParentFails) {
  TypeParam heap;
  for (std::size_t size : {0ul, 1ul, 24ul, 100ul, 5000ul, 1ul << 20}) {
    EXPECT_EQ(heap.malloc(size), nullptr) << size;
  }
  // Once the parent recovers, the heap works again.
  heap.setBudget(100);
  void* object = heap.malloc(64);
  ASSERT_NE(object, nullptr);
  std::memset(object, 1, 64);
  heap.free(object);
}

TYPED_TEST(NullPropagation, ImpossibleSizesFailCleanly) {
  TypeParam heap;
  heap.setBudget(100);
  for (std::size_t size : {SIZE_MAX, SIZE_MAX - 15, SIZE_MAX / 2 + 1}) {
    EXPECT_EQ(heap.malloc(size), nullptr) << size;
  }
  heap.free(nullptr);  // a no-op everywhere
}

TEST(TopHeaps, ImpossibleSizesFailCleanly) {
  MmapHeap mmapHeap;
  SbrkHeap sbrkHeap(std::size_t{1} << 30);
  MallocHeap mallocHeap;
  for (std::size_t size : {SIZE_MAX, SIZE_MAX - 4096, std::size_t{1} << 62}) {
    EXPECT_EQ(mmapHeap.malloc(size), nullptr);
    EXPECT_EQ(sbrkHeap.malloc(size), nullptr);
    EXPECT_EQ(mallocHeap.malloc(size), nullptr);
  }
  EXPECT_EQ(mmapHeap.bytesHeld(), 0u);
  EXPECT_EQ(sbrkHeap.bytesHeld(), 0u);
}

// --- top heaps ------------------------------------------------------------------------

TEST(SbrkHeap, IsContiguousAndRetractsFromTheTop) {
  SbrkHeap heap;
  auto* a = static_cast<char*>(heap.malloc(100));
  auto* b = static_cast<char*>(heap.malloc(100));
  EXPECT_EQ(b, a + heap.getSize(a) + 16) << "blocks follow each other";
  std::size_t top = heap.breakOffset();
  heap.free(a);  // not at the top: the break stays
  EXPECT_EQ(heap.breakOffset(), top);
  heap.free(b);  // the top block, and the freed one below it, go back
  EXPECT_EQ(heap.breakOffset(), 0u);
}

TEST(SbrkHeap, GivesPagesBackWhenTheBreakFalls) {
  SbrkHeap heap;
  void* big = heap.malloc(8 << 20);
  std::memset(big, 1, 8 << 20);
  EXPECT_GE(heap.bytesHeld(), std::size_t{8} << 20);
  heap.free(big);
  EXPECT_LE(heap.bytesHeld(), 2 * ReservedMapping::kCommitStep);
  EXPECT_GE(heap.peakBytesHeld(), std::size_t{8} << 20);
}

TEST(StaticHeap, StaysInsideTheCallersBufferAndSaysNoWhenFull) {
  alignas(16) static unsigned char buffer[4096];
  StaticHeap heap(buffer, sizeof buffer);
  std::vector<void*> objects;
  while (void* object = heap.malloc(100)) {
    EXPECT_GE(static_cast<unsigned char*>(object), buffer);
    EXPECT_LE(static_cast<unsigned char*>(object) + 100, buffer + sizeof buffer);
    objects.push_back(object);
  }
  EXPECT_EQ(objects.size(), sizeof buffer / (112 + 16));
  EXPECT_LE(heap.bytesHeld(), sizeof buffer);
  for (auto it = objects.rbegin(); it != objects.rend(); ++it) heap.free(*it);
  EXPECT_EQ(heap.bytesHeld(), 0u);
  EXPECT_NE(heap.malloc(100), nullptr) << "space is reusable after freeing";
}

TEST(StaticHeap, UnalignedOrTinyBuffersAreHandled) {
  alignas(16) static unsigned char buffer[64];
  StaticHeap unaligned(buffer + 3, sizeof buffer - 3);
  void* object = unaligned.malloc(16);
  ASSERT_NE(object, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(object) % 16, 0u);
  StaticHeap tiny(buffer, 8);
  EXPECT_EQ(tiny.malloc(1), nullptr);
  StaticHeap none(nullptr, 1000);
  EXPECT_EQ(none.malloc(1), nullptr);
}

TEST(TopHeaps, DestructorReturnsObjectsTheProgramLeaked) {
  TeardownAudit::leftoverBytes = 0;
  {
    AuditedTop heap;
    for (int i = 0; i < 10; ++i) heap.malloc(1000);
  }
  // The top heap saw 10 blocks still held when it was torn down, and released them
  // (ASan's leak checker would flag them otherwise).
  EXPECT_GE(TeardownAudit::leftoverBytes, 10000u);
}

// --- building blocks --------------------------------------------------------------------

TEST(FreelistHeap, ReusesTheLastFreedObjectFirst) {
  FreelistHeap<SizeHeap<MallocHeap>> heap;
  void* a = heap.malloc(32);
  void* b = heap.malloc(32);
  heap.free(a);
  heap.free(b);
  EXPECT_EQ(heap.malloc(32), b);
  EXPECT_EQ(heap.malloc(32), a);
}

TEST(FreelistHeap, NeverHandsOutAnObjectTooSmallForTheRequest) {
  FreelistHeap<SizeHeap<MallocHeap>> heap;
  void* small = heap.malloc(16);
  heap.free(small);
  void* large = heap.malloc(4000);
  EXPECT_NE(large, small);
  EXPECT_GE(heap.getSize(large), 4000u);
}

TEST(BoundedFreelistHeap, KeepsAtMostBoundObjects) {
  BoundedFreelistHeap<8, SizeHeap<MallocHeap>> heap;
  std::vector<void*> objects;
  for (int i = 0; i < 20; ++i) objects.push_back(heap.malloc(64));
  std::size_t heldWithAllLive = heap.bytesHeld();
  for (void* object : objects) heap.free(object);
  EXPECT_EQ(heap.cachedObjects(), 8u);
  EXPECT_EQ(heap.bytesHeld(), heldWithAllLive * 8 / 20) << "12 objects went back to the parent";
}

TEST(ChunkHeap, CarvesManyObjectsFromOneChunk) {
  ChunkHeap<64 * 1024, MallocHeap> heap;
  for (int i = 0; i < 1000; ++i) ASSERT_NE(heap.malloc(48), nullptr);
  EXPECT_LE(heap.bytesHeld(), 64u * 1024 + 64);
  void* huge = heap.malloc(1 << 20);  // its own chunk
  ASSERT_NE(huge, nullptr);
  EXPECT_GT(heap.bytesHeld(), 1u << 20);
  static_assert(!SizedHeap<ChunkHeap<4096, MallocHeap>>, "ChunkHeap objects carry no size");
}

TEST(AdaptHeap, FirstFitAcrossMixedSizes) {
  AdaptHeap<DLList, SizeHeap<MallocHeap>> heap;
  void* small = heap.malloc(32);
  void* large = heap.malloc(512);
  heap.free(large);
  heap.free(small);
  EXPECT_EQ(heap.malloc(100), large) << "the small object does not fit, the large one does";
  EXPECT_EQ(heap.malloc(16), small);
}

// A walk sees the list's objects from the last inserted to the first, and ends after the
// last (the sentinel is never handed out); an object unlinked in the middle drops out.
TEST(DLList, WalksFromFirstToLastAndSkipsAnUnlinkedObject) {
  Uncounted plain;
  DLList list;
  EXPECT_EQ(list.first(plain), nullptr);
  DLList::Node a, b, c;
  list.insert(plain, &a);
  list.insert(plain, &b);
  list.insert(plain, &c);
  auto walk = [&] {
    std::vector<void*> seen;
    for (void* node = list.first(plain); node != nullptr; node = list.next(plain, node)) seen.push_back(node);
    return seen;
  };
  EXPECT_EQ(walk(), (std::vector<void*>{&c, &b, &a}));
  DLList::unlink(plain, &b);
  EXPECT_EQ(walk(), (std::vector<void*>{&c, &a}));
  DLList::unlink(plain, &c);
  DLList::unlink(plain, &a);
  EXPECT_EQ(list.first(plain), nullptr);
  EXPECT_TRUE(list.empty(plain));
}

// Three neighbours carved from one region: freeing them in any order merges them, and the
// wholly free region goes back to the parent.
using Coalescing = CoalesceHeap<AdaptHeap<DLList, CoalesceableHeap<64 * 1024, MallocHeap>>>;

TEST(CoalesceHeap, SplitsARegionIntoAdjacentBlocks) {
  Coalescing heap;
  auto* a = static_cast<char*>(heap.malloc(100));
  auto* b = static_cast<char*>(heap.malloc(100));
  // 100 bytes round up to 104 usable: a 112-byte block, whose last 8 bytes are b's size word.
  EXPECT_EQ(heap.getSize(a), 104u);
  EXPECT_EQ(b, a + heap.getSize(a) + 8) << "b is cut from the remainder right after a";
  EXPECT_LT(heap.bytesHeld(), 2u * 64 * 1024) << "both from one region";
}

TEST(CoalesceHeap, MergesFreedNeighboursAndReleasesAWholeRegion) {
  for (int order = 0; order < 6; ++order) {
    Coalescing heap;
    void* blocks[3] = {heap.malloc(200), heap.malloc(200), heap.malloc(200)};
    void* keep = heap.malloc(200);  // keeps the region alive until the end
    int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int i : orders[order]) heap.free(blocks[i]);
    // The three freed 208-byte blocks (200 usable each) are one block of 3 * 208 - 8 usable.
    void* merged = heap.malloc(3 * 208 - 8);
    EXPECT_EQ(merged, blocks[0]) << "order " << order;
    heap.free(merged);
    heap.free(keep);
    EXPECT_EQ(heap.bytesHeld(), 0u) << "the whole region went back, order " << order;
  }
}

// Boundary tags cost one word per block, as dlmalloc's chunks: 24 usable bytes take 32,
// and a free block's length lives in its own last word, which is data while in use.
TEST(CoalesceHeap, BlocksCostOneWordAndTheirLastWordIsData) {
  Coalescing heap;
  auto* a = static_cast<char*>(heap.malloc(24));
  auto* b = static_cast<char*>(heap.malloc(24));
  auto* c = static_cast<char*>(heap.malloc(24));
  EXPECT_EQ(heap.getSize(a), 24u);
  EXPECT_EQ(b, a + 32);
  EXPECT_EQ(c, b + 32);
  std::memset(b, 0xAB, heap.getSize(b));
  heap.free(a);  // a's length goes into a's last word, not into b
  heap.free(c);
  for (std::size_t i = 0; i < heap.getSize(b); ++i) ASSERT_EQ(static_cast<unsigned char>(b[i]), 0xAB) << i;
  std::memset(b, 0xCD, heap.getSize(b));  // b in use owns its last word: nothing reads it
  heap.free(b);                         // merges a, b and c back into the region
  EXPECT_EQ(heap.bytesHeld(), 0u) << "all three merged and the region went back";
}

TEST(CoalesceableHeap, LargeRequestsGetARegionOfTheirOwn) {
  CoalesceableHeap<64 * 1024, MallocHeap> heap;
  void* big = heap.malloc(1 << 20);
  EXPECT_GE(heap.getSize(big), 1u << 20);
  EXPECT_TRUE(heap.isWholeRegion(big));
  heap.free(big);
  EXPECT_EQ(heap.bytesHeld(), 0u);
}

// --- combining ----------------------------------------------------------------------------

TEST(StrictSegHeap, RoundsToTheSizeClassAndRecyclesWithinIt) {
  KingsleyHeap<MallocHeap> heap;
  void* a = heap.malloc(100);
  EXPECT_EQ(heap.getSize(a), 128u);
  heap.free(a);
  EXPECT_EQ(heap.malloc(120), a) << "same class";
  void* b = heap.malloc(200);
  EXPECT_NE(b, a);
  EXPECT_EQ(heap.getSize(b), 256u);
}

// A bin is only its free-list head: the hot path indexes bins as an array of heads.
TEST(StrictSegHeap, BinsAreOneWordEach) {
  using Bins = KingsleyHeap<MallocHeap>::Bin;
  EXPECT_EQ(sizeof(Bins), sizeof(void*));
}

template <class Parent>
using OneObjectBin = BoundedFreelistHeap<1, Parent>;

// A bin with no pointer of its own still reaches the big heap: a full bounded bin hands
// the object back, and a bin being destroyed hands back what it cached.
TEST(StrictSegHeap, BinsHandObjectsBackToTheBigHeap) {
  using Heap = StrictSegHeap<kingsley::Classes, OneObjectBin, SizeHeap<AuditedTop>>;
  std::size_t leftoverBefore = TeardownAudit::leftoverBytes;
  {
    Heap heap;
    void* kept = heap.malloc(100);
    void* first = heap.malloc(100);
    void* second = heap.malloc(100);
    std::size_t held = heap.bytesHeld();
    heap.free(first);
    EXPECT_EQ(heap.bytesHeld(), held) << "cached in its bin";
    heap.free(second);
    EXPECT_LT(heap.bytesHeld(), held) << "the bin was full: back to the big heap";
    EXPECT_EQ(heap.malloc(128), first) << "the cached one is reused";
    heap.free(first);
    heap.free(kept);  // the bin is full again: kept goes back, first stays cached
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, leftoverBefore) << "the destroyed bin handed its cached object back";
}

TEST(SegHeap, SearchesLargerClassesBeforeAskingTheBigHeap) {
  CoalescingKingsleyHeap<MallocHeap> heap;
  void* big = heap.malloc(4000);
  void* guard = heap.malloc(16);
  heap.free(big);
  std::size_t held = heap.bytesHeld();
  void* small = heap.malloc(100);
  EXPECT_EQ(small, big) << "split from the free 4000-byte block";
  EXPECT_EQ(heap.bytesHeld(), held);
  heap.free(small);
  heap.free(guard);
}

TEST(HybridHeap, RoutesBySizeAndSendsEachObjectHome) {
  HybridHeap<256, SizeHeap<MallocHeap>, SizeHeap<MmapHeap>> heap;
  void* small = heap.malloc(256);
  void* large = heap.malloc(257);
  EXPECT_EQ(heap.bigHeap().bytesHeld(), 4096u);
  EXPECT_GE(heap.getSize(large), 257u) << "the routing bit does not leak into the size";
  heap.free(large);
  EXPECT_EQ(heap.bigHeap().bytesHeld(), 0u);
  heap.free(small);
  EXPECT_EQ(heap.bytesHeld(), 0u);
}

TEST(ThresholdHeap, CachesUpToItsLimitThenReleases) {
  ThresholdHeap<10000, SizeHeap<MallocHeap>> heap;
  void* objects[4] = {heap.malloc(4000), heap.malloc(4000), heap.malloc(4000), heap.malloc(4000)};
  std::size_t heldAll = heap.bytesHeld();
  for (void* object : objects) heap.free(object);
  EXPECT_EQ(heap.cachedBytes(), 8000u) << "two fit under the threshold";
  EXPECT_EQ(heap.bytesHeld(), heldAll / 2);
  EXPECT_EQ(heap.malloc(3000), objects[1]) << "reused from the cache";
}

TEST(AdaptiveThresholdHeap, KeepsTheLastFreedReusesTheBestFitAndTrimsWhenLowered) {
  AdaptiveThresholdHeap<10000, SizeHeap<MallocHeap>> heap;
  void* objects[4] = {heap.malloc(4000), heap.malloc(4000), heap.malloc(4000), heap.malloc(4000)};
  std::size_t heldAll = heap.bytesHeld();
  for (void* object : objects) heap.free(object);
  EXPECT_EQ(heap.cachedBytes(), 8000u) << "two fit under the threshold";
  EXPECT_EQ(heap.bytesHeld(), heldAll / 2);
  EXPECT_EQ(heap.malloc(4000), objects[3]) << "the last freed were kept";
  EXPECT_EQ(heap.malloc(4000), objects[2]);
  heap.setTrimThreshold(20000);
  void* more[4] = {objects[3], objects[2], heap.malloc(6000), heap.malloc(3000)};
  std::size_t heldMore = heap.bytesHeld();
  for (void* object : more) heap.free(object);
  EXPECT_EQ(heap.cachedBytes(), 4000u + 4000 + 6000 + heap.getSize(more[3])) << "a raised threshold keeps more";
  EXPECT_EQ(heap.bytesHeld(), heldMore);
  void* reused[2] = {heap.malloc(2500), heap.malloc(5000)};
  EXPECT_EQ(reused[0], more[3]) << "the smallest that fits, not the first";
  EXPECT_EQ(reused[1], more[2]);
  heap.setTrimThreshold(4000);
  EXPECT_EQ(heap.cachedBytes(), 4000u) << "lowering the threshold gives back the oldest";
  EXPECT_LE(heap.bytesHeld(), heldMore - 4000);
  void* newest = heap.malloc(4000);
  EXPECT_EQ(newest, objects[2]) << "the newest stayed";
  heap.free(newest);
  for (void* object : reused) heap.free(object);
}

// glibc's dynamic thresholds: freeing a mapped block bigger than the mmap threshold (up
// to 32 MiB) raises it to the block's size and the trim threshold to twice that; blocks
// of that size then come from the heap, and wholly free regions stay for reuse.
TEST(AdaptiveLeaHeap, FreeingAMappedBlockRaisesBothThresholds) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  AdaptiveLeaHeap<MmapHeap> heap;
  EXPECT_EQ(heap.mmapThreshold(), lea::kMmapThreshold);
  EXPECT_EQ(heap.trimThreshold(), lea::kTrimThreshold);
  void* mapped = heap.malloc(3 * kMiB);
  EXPECT_GT(heap.bigHeap().bytesHeld(), 3 * kMiB);
  std::memset(mapped, 1, 3 * kMiB);
  heap.free(mapped);
  EXPECT_EQ(heap.bigHeap().bytesHeld(), 0u) << "the block itself is unmapped, as in glibc";
  EXPECT_GE(heap.mmapThreshold(), 3 * kMiB);
  EXPECT_LE(heap.mmapThreshold(), 3 * kMiB + pageSize());
  EXPECT_EQ(heap.trimThreshold(), 2 * heap.mmapThreshold() + lea::kTrimPadBytes);
  EXPECT_GE(heap.regionBytes(), heap.mmapThreshold()) << "a region holds any request the heap serves";
  // The same request now comes from the heap's regions, and is reused once freed.
  void* inHeap = heap.malloc(3 * kMiB);
  EXPECT_EQ(heap.bigHeap().bytesHeld(), 0u);
  std::memset(inHeap, 2, 3 * kMiB);
  std::size_t held = heap.bytesHeld();
  heap.free(inHeap);
  EXPECT_EQ(heap.bytesHeld(), held) << "a wholly free region within the trim threshold stays";
  void* reused = heap.malloc(2 * kMiB);  // smaller: served from the same freed region
  EXPECT_EQ(heap.bytesHeld(), held);
  heap.free(reused);
  // Smaller mapped blocks do not lower the threshold; bigger ones beyond 32 MiB do not
  // raise it.
  std::size_t threshold = heap.mmapThreshold();
  void* huge = heap.malloc(40 * kMiB);
  EXPECT_GT(heap.bigHeap().bytesHeld(), 40 * kMiB);
  heap.free(huge);
  EXPECT_EQ(heap.mmapThreshold(), threshold);
  // Lowering the trim threshold gives the free regions back.
  heap.setTrimThreshold(0);
  EXPECT_LT(heap.bytesHeld(), held - 2 * kMiB);
}

// A top heap that counts the blocks it maps.
struct MapCountingTop : MmapHeap {
  void* malloc(std::size_t size) {
    ++maps;
    return MmapHeap::malloc(size);
  }
  std::size_t maps = 0;
};

// Buffers of 16-256 KiB replaced in a loop, four live (bench-malloc's buffers): once the
// mmap threshold has risen, a freed buffer's memory is reused, not given back and mapped
// again. Before regions grew with the threshold, each big buffer took a region of its
// own, freed whole, and about one replacement in three mapped a new one.
TEST(AdaptiveLeaHeap, FreedMediumBlocksAreReusedNotUnmapped) {
  AdaptiveLeaHeap<MapCountingTop> heap;
  std::uint64_t state = 0x9E3779B97F4A7C15u;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  void* live[4] = {};
  auto replace = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) {
      std::size_t victim = next() % 4;
      heap.free(live[victim]);
      std::size_t size = 16 * 1024 + next() % (240 * 1024);
      live[victim] = heap.malloc(size);
      ASSERT_NE(live[victim], nullptr);
      std::memset(live[victim], static_cast<int>(i), size);
    }
  };
  replace(200);  // the threshold rises to the biggest buffers freed
  EXPECT_GE(heap.mmapThreshold(), 240 * 1024u);
  std::size_t maps = heap.maps, mapped = heap.bigHeap().bytesHeld();
  replace(4000);
  EXPECT_LE(heap.maps - maps, 4u) << "regions mapped for 4000 replacements";
  EXPECT_LE(heap.bytesHeld(), 4 * heap.regionBytes() + heap.trimThreshold() + mapped);
  for (void* block : live) heap.free(block);
}

// A parent that counts the objects it hands out.
struct MallocCountingTop : MallocHeap {
  void* malloc(std::size_t size) {
    ++mallocs;
    return MallocHeap::malloc(size);
  }
  std::size_t mallocs = 0;
};

// Trimming with hysteresis: a working set that swings between 0 and 20 objects keeps the
// objects of the swing (without it, each swing gave back all but two and took them again),
// never holds more than at its peak, and gives the surplus back two windows after.
TEST(AdaptiveThresholdHeap, WithAPeakWindowKeepsWhatARecentSwingUsed) {
  constexpr std::size_t kThreshold = 8000, kObjects = 20;
  auto swing = [](auto& heap, int rounds) {
    std::vector<void*> objects;
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t i = 0; i < kObjects; ++i) objects.push_back(heap.malloc(4000));
      for (void* object : objects) heap.free(object);
      objects.clear();
    }
  };
  AdaptiveThresholdHeap<kThreshold, SizeHeap<MallocCountingTop>> plain;
  swing(plain, 50);
  EXPECT_GE(plain.mallocs, 49 * (kObjects - 2)) << "without hysteresis, each swing takes them again";

  AdaptiveThresholdHeap<kThreshold, SizeHeap<MallocCountingTop>, 64, 100> heap;
  swing(heap, 50);
  EXPECT_EQ(heap.mallocs, kObjects) << "taken once, kept through every swing";
  std::size_t peak = heap.bytesHeld();
  EXPECT_LE(heap.cachedBytes(), peak);
  EXPECT_GT(heap.keptBytesLimit(), kThreshold);
  // Steady small use for two windows: the swing's objects go back, the threshold's stay.
  for (int i = 0; i < 2 * 64; ++i) heap.free(heap.malloc(100));
  EXPECT_LE(heap.cachedBytes(), kThreshold);
  EXPECT_EQ(heap.keptBytesLimit(), kThreshold);
  // The cap: at most PeakKeepFactor thresholds beyond what is in use.
  AdaptiveThresholdHeap<kThreshold, SizeHeap<MallocCountingTop>, 64, 2> capped;
  swing(capped, 1);
  EXPECT_LE(capped.cachedBytes(), 2 * kThreshold);
}

// Producer/consumer with records of 32 KiB and 4096 objects of 64 B, up to 100 records
// queued (bench-malloc's prodcons, in one thread): the queue fills and drains by half,
// and each drain frees regions whole (16 MiB). Without hysteresis on trimming, each refill mapped most of
// them again (some 500 regions a cycle; 37,000 memory system calls in the benchmark).
TEST(AdaptiveLeaHeap, AWorkingSetThatFillsAndDrainsKeepsItsRegions) {
  constexpr std::size_t kObjects = 4096, kRecords = 100;
  AdaptiveLeaHeap<MapCountingTop> heap;
  std::vector<void**> queue;
  auto fill = [&] {
    while (queue.size() < kRecords) {
      auto** record = static_cast<void**>(heap.malloc(kObjects * sizeof(void*) + 8));
      ASSERT_NE(record, nullptr);
      for (std::size_t k = 0; k < kObjects; ++k) {
        record[k] = heap.malloc(64);
        ASSERT_NE(record[k], nullptr);
        std::memset(record[k], 1, 64);
      }
      queue.push_back(record);
    }
  };
  auto drain = [&](std::size_t left) {
    while (queue.size() > left) {
      void** record = queue.back();
      queue.pop_back();
      for (std::size_t k = 0; k < kObjects; ++k) heap.free(record[k]);
      heap.free(record);
    }
  };
  fill();
  drain(kRecords / 2);
  std::size_t maps = heap.maps;
  for (int cycle = 0; cycle < 5; ++cycle) {
    fill();
    drain(kRecords / 2);
  }
  EXPECT_LE(heap.maps - maps, 20u) << "regions mapped again over 5 cycles of 50 records drained and refilled";
  drain(0);
}

// LeaHeap keeps dlmalloc 2.7's fixed thresholds: it is the DMM simulator's LEA preset.
TEST(LeaHeap, ThresholdsStayFixed) {
  LeaHeap<MmapHeap> heap;
  for (int i = 0; i < 3; ++i) {
    void* block = heap.malloc(1 << 20);
    EXPECT_GT(heap.bigHeap().bytesHeld(), 0u) << i;
    heap.free(block);
    EXPECT_EQ(heap.bigHeap().bytesHeld(), 0u) << i;
  }
}

TEST(QuickListHeap, ConsolidatesWhenAMediumRequestCannotBeMet) {
  LeaCoreHeap<MallocHeap> heap;
  // Fill most of one region with small objects, free them into the quick lists, then ask
  // for a medium block larger than the rest of the region: it must come from the
  // consolidated small ones, not from a new region.
  std::vector<void*> small;
  for (std::size_t i = 0; i < lea::kRegionBytes / 80; ++i) small.push_back(heap.malloc(64));  // 80-byte blocks
  std::size_t held = heap.bytesHeld();
  for (void* object : small) heap.free(object);
  void* medium = heap.malloc(lea::kRegionBytes / 2);
  EXPECT_LE(heap.bytesHeld(), held) << "no new region: the quick lists were merged back";
  heap.free(medium);
}

TEST(QuickListHeap, ConsolidatesBeforeALargeRequest) {
  LeaCoreHeap<MallocHeap> heap;
  // Freed small neighbours merge before a request of 1 KiB or more is placed, so it goes
  // where they were rather than being cut from the rest of the region.
  std::vector<void*> small;
  for (int i = 0; i < 40; ++i) small.push_back(heap.malloc(64));
  for (void* object : small) heap.free(object);
  void* large = heap.malloc(2000);
  EXPECT_EQ(large, small.front());
  heap.free(large);
}

TEST(LeaHeap, LargeObjectsAreMappedAndUnmapped) {
  LeaHeap<MallocHeap> heap;
  void* large = heap.malloc(1 << 20);
  EXPECT_GE(heap.bigHeap().bytesHeld(), 1u << 20);
  heap.free(large);
  EXPECT_EQ(heap.bigHeap().bytesHeld(), 0u);
}

TEST(SizeClasses, LeaClassesCoverEverySizeInOrder) {
  for (std::size_t size = 1; size < (1 << 22); size += 1 + size / 64) {
    std::size_t sizeClass = lea::sizeToClass(size);
    ASSERT_LT(sizeClass, lea::kNumBins);
    ASSERT_GE(lea::classToMaxSize(sizeClass), size);
    if (sizeClass > 0) {
      ASSERT_LT(lea::classToMaxSize(sizeClass - 1), size) << size;
    }
  }
  for (std::size_t size = 1; size <= (std::size_t{1} << 32); size = size * 3 / 2 + 1) {
    std::size_t sizeClass = kingsley::sizeToClass(size);
    ASSERT_GE(kingsley::classToSize(sizeClass), size);
    if (sizeClass > 0) {
      ASSERT_LT(kingsley::classToSize(sizeClass - 1), size);
    }
  }
}

// --- utility --------------------------------------------------------------------------------

struct RecordedError {
  static inline std::vector<HeapError> errors;
  static void record(HeapError error, void*, std::size_t) { errors.push_back(error); }
};

TEST(DebugHeap, CatchesDoubleFreeInvalidFreeAndOverflow) {
  RecordedError::errors.clear();
  DebugHeap<8, SizeHeap<MallocHeap>> heap;
  heap.setErrorHandler(RecordedError::record);
  auto* object = static_cast<char*>(heap.malloc(40));
  EXPECT_EQ(heap.getSize(object), 40u);
  heap.free(object);
  EXPECT_EQ(static_cast<unsigned char>(object[0]), 0xDD) << "freed memory is filled";
  heap.free(object);
  ASSERT_EQ(RecordedError::errors.size(), 1u);
  EXPECT_EQ(RecordedError::errors[0], HeapError::DoubleFree);

  alignas(16) char notFromTheHeap[64] = {};
  heap.free(notFromTheHeap + 32);
  ASSERT_EQ(RecordedError::errors.size(), 2u);
  EXPECT_EQ(RecordedError::errors[1], HeapError::InvalidFree);

  auto* overflowing = static_cast<char*>(heap.malloc(10));
  overflowing[10] = 'x';
  heap.free(overflowing);
  ASSERT_EQ(RecordedError::errors.size(), 3u);
  EXPECT_EQ(RecordedError::errors[2], HeapError::Overflow);
}

TEST(DebugHeapDeathTest, ReportsClearlyAndAborts) {
  auto freeTwice = [] {
    DebugHeap<8, SizeHeap<MallocHeap>> heap;
    void* object = heap.malloc(24);
    heap.free(object);
    heap.free(object);
  };
  EXPECT_DEATH(freeTwice(), "heapkit DebugHeap: double free: object 0x[0-9a-f]+ \\(24 bytes\\)");
}

// Hardened Kingsley keeps a listed object's freed mark in SizeHeap's cookie: a second free
// is found by the cookie's check, however many frees came between, and an object handed
// out again is freed without complaint.
TEST(HardenedKingsleyDeathTest, CookieMarksFreedObjects) {
  using Hardened = KingsleyHeap<heapkit::Hardened<MmapHeap>>;
  {
    Hardened heap;
    void* a = heap.malloc(24);
    void* b = heap.malloc(24);
    heap.free(a);
    heap.free(b);
    EXPECT_EQ(heap.malloc(24), b);
    EXPECT_EQ(heap.malloc(24), a);
    heap.free(a);
    heap.free(b);
  }
  auto freeAgainLater = [] {
    Hardened heap;
    void* a = heap.malloc(100);
    void* b = heap.malloc(100);
    heap.free(a);
    heap.free(b);
    heap.free(a);
  };
  EXPECT_DEATH(freeAgainLater(), "heapkit: free\\(\\): double free of 0x[0-9a-f]+");
  auto freeForeign = [] {
    Hardened heap;
    alignas(16) std::uint64_t words[8] = {};
    heap.free(&words[4]);
  };
  EXPECT_DEATH(freeForeign(), "heapkit: free\\(\\): invalid pointer 0x[0-9a-f]+");
}

// Hardened Lea checks a quick-listed block's own word on free (a block it holds free or
// marked retired, freed again: BoundaryTags::kRetired) and the next block's when the quick
// lists are consolidated: a made-up block whose length passes but whose next block is none
// is reported then, naming its pointer.
TEST(HardenedLeaDeathTest, QuickListsCheckedWhenConsolidated) {
  using Hardened = AdaptiveLeaHeap<heapkit::Hardened<MmapHeap>>;
  auto freeMadeUpBlock = [] {
    Hardened heap;
    alignas(16) static std::uint64_t words[16] = {};
    words[1] = 48;  // the size word of a 48-byte block in use at &words[2] ...
    words[7] = 16;  // ... whose next block's length is no block's
    heap.free(&words[2]);
    std::fputs("quick-listed\n", stderr);
    heap.free(heap.malloc(4000));  // consolidates the quick lists
  };
  EXPECT_DEATH(freeMadeUpBlock(), "quick-listed.*heapkit: free\\(\\): invalid pointer 0x[0-9a-f]+");
  auto freeTooShortBlock = [] {
    Hardened heap;
    alignas(16) static std::uint64_t words[8] = {};
    words[1] = 16;  // a length no block has: waits on a list no malloc serves
    heap.free(&words[2]);
    std::fputs("quick-listed\n", stderr);
    heap.free(heap.malloc(8));  // not served from that list: the heap grows, consolidated first
    heap.free(heap.malloc(4000));
  };
  EXPECT_DEATH(freeTooShortBlock(), "quick-listed.*heapkit: free\\(\\): invalid pointer 0x[0-9a-f]+");
  auto freeFreedBlockAgain = [] {
    Hardened heap;
    void* a = heap.malloc(40);
    void* b = heap.malloc(40);
    void* fence = heap.malloc(40);
    heap.free(a);
    heap.free(b);
    heap.free(heap.malloc(4000));  // a and b go below, merged
    heap.free(a);
    (void)fence;
  };
  EXPECT_DEATH(freeFreedBlockAgain(), "heapkit: free\\(\\): double free of 0x[0-9a-f]+");
  // Merged into the free block before it: its word is stale (neither free nor a quick
  // list's), and marked retired when the merge left it behind.
  auto freeMergedAwayBlockAgain = [] {
    Hardened heap;
    void* a = heap.malloc(40);
    void* b = heap.malloc(40);
    void* fence = heap.malloc(40);
    heap.free(b);
    heap.free(a);  // consolidated first (the lists are LIFO): b merges backwards into it
    heap.free(heap.malloc(4000));
    std::fputs("merged\n", stderr);
    heap.free(b);
    std::_Exit(0);  // not reported at the free itself (the destructor's consolidation would)
    (void)fence;
  };
  EXPECT_DEATH(freeMergedAwayBlockAgain(), "merged.*heapkit: free\\(\\): double free of 0x[0-9a-f]+");
  // Freed twice while on a quick list: the mark sends it to the full checks, which name it.
  auto freeQuickListedAgain = [] {
    Hardened heap;
    void* a = heap.malloc(24);
    void* b = heap.malloc(24);
    heap.free(a);
    heap.free(b);
    std::fputs("quick-listed\n", stderr);
    heap.free(a);
    std::_Exit(0);
  };
  EXPECT_DEATH(freeQuickListedAgain(), "quick-listed.*heapkit: free\\(\\): double free of 0x[0-9a-f]+");
}

// A quick-listed block's size word overwritten while it waits (an overflow of the block
// before it, by one byte or a fill) is reported when the lists are consolidated, before
// its length is trusted: the mark gone, a length no block has, the free bit, high bits.
TEST(HardenedLeaDeathTest, QuickListedWordOverwrittenIsReportedAtConsolidation) {
  using Hardened = AdaptiveLeaHeap<heapkit::Hardened<MmapHeap>>;
  auto overwriteThenConsolidate = [](auto overwrite) {
    Hardened heap;
    void* before = heap.malloc(24);
    void* victim = heap.malloc(24);
    void* fence = heap.malloc(24);
    heap.free(victim);  // quick-listed, marked
    overwrite(static_cast<std::uint64_t*>(victim) - 1);  // its size word
    std::fputs("overwritten\n", stderr);
    heap.free(heap.malloc(4000));  // consolidates the quick lists
    (void)before;
    (void)fence;
  };
  const char* reported = "overwritten.*heapkit: (free\\(\\): invalid pointer|corrupted free list at) 0x[0-9a-f]+";
  // The mark's bit cleared (bit 47 of the word).
  EXPECT_DEATH(overwriteThenConsolidate([](std::uint64_t* word) { *word &= ~(std::uint64_t{1} << 47); }), reported);
  // A NUL into its low byte: length 0.
  EXPECT_DEATH(overwriteThenConsolidate([](std::uint64_t* word) { *reinterpret_cast<unsigned char*>(word) = 0; }),
               reported);
  // An odd byte ('1'): the free bit.
  EXPECT_DEATH(overwriteThenConsolidate([](std::uint64_t* word) { *reinterpret_cast<unsigned char*>(word) = '1'; }),
               reported);
  // A fill of 0xff over the whole word: the mark kept, every bit above it set.
  EXPECT_DEATH(overwriteThenConsolidate([](std::uint64_t* word) { *word = ~std::uint64_t{0}; }), reported);
}

// The mark of a quick-listed block is the heap's own: a correct program never sees it in a
// block it is handed (malloc clears it), and the heap's blocks stay consistent while the
// quick lists hold marked blocks between free blocks (the model check, hardened).
TEST(HardenedLea, QuickListMarksAreClearedWhenHandedOut) {
  using Hardened = AdaptiveLeaHeap<heapkit::Hardened<MmapHeap>>;
  Hardened heap;
  void* a = heap.malloc(56);
  std::size_t usable = heap.getSize(a);
  heap.free(a);
  EXPECT_EQ(heap.malloc(56), a);
  EXPECT_EQ(heap.getSize(a), usable);
  heap.free(a);
  heap.free(heap.malloc(4000));  // consolidated: the mark goes with it
  void* again = heap.malloc(56);
  EXPECT_EQ(heap.getSize(again), usable);
  heap.free(again);
}

TEST(ProfileHeap, MeasuresInternalFragmentation) {
  ProfileHeap<KingsleyHeap<MallocHeap>> heap;
  void* a = heap.malloc(100);  // 100 + 16 profile header -> Kingsley class 128
  void* b = heap.malloc(1000);  // 1016 -> 1024
  const HeapProfile& profile = heap.profile();
  EXPECT_EQ(profile.mallocs, 2u);
  EXPECT_EQ(profile.liveRequestedBytes, 1100u);
  EXPECT_EQ(profile.liveHeldBytes, 128u + 1024u);
  EXPECT_NEAR(profile.internalFragmentation(), 1152.0 / 1100.0, 1e-9);
  heap.free(a);
  heap.free(b);
  EXPECT_EQ(profile.liveObjects, 0u);
  EXPECT_EQ(profile.peakRequestedBytes, 1100u);
}

TEST(TraceHeap, WritesOneLinePerEvent) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  TraceHeap<SizeHeap<MallocHeap>> heap;
  heap.traceTo(sink);
  void* object = heap.malloc(42);
  heap.free(object);
  std::rewind(sink);
  char line1[128] = {}, line2[128] = {};
  ASSERT_NE(std::fgets(line1, sizeof line1, sink), nullptr);
  ASSERT_NE(std::fgets(line2, sizeof line2, sink), nullptr);
  char expected[128];
  std::snprintf(expected, sizeof expected, "0 new %p 42\n", object);
  EXPECT_STREQ(line1, expected);
  std::snprintf(expected, sizeof expected, "1 delete %p\n", object);
  EXPECT_STREQ(line2, expected);
  std::fclose(sink);
}

TEST(ThrowExceptionHeap, ThrowsBadAllocInsteadOfReturningNull) {
  ThrowExceptionHeap<SizeHeap<FailingTop>> heap;
  EXPECT_THROW(heap.malloc(10), std::bad_alloc);
  heap.setBudget(1);
  void* object = nullptr;
  EXPECT_NO_THROW(object = heap.malloc(10));
  heap.free(object);
}

TEST(UniqueHeap, AllInstancesShareOneHeap) {
  UniqueHeap<FreelistHeap<SizeHeap<MallocHeap>>> first, second;
  void* object = first.malloc(64);
  second.free(object);
  EXPECT_EQ(first.malloc(64), object);
  first.free(object);
}

// --- the harness itself must catch a broken heap --------------------------------------------

// Hands the same block out twice: a model check that passes this is worthless.
class OverlappingHeap : public SizeHeap<MallocHeap> {
 public:
  void* malloc(std::size_t size) {
    if (size <= 64 && last_ != nullptr) return last_;
    return last_ = SizeHeap<MallocHeap>::malloc(size < 64 ? 64 : size);
  }
  void free(void*) {}

 private:
  void* last_ = nullptr;
};

// Every 50th malloc overwrites a byte of some other live object, like a layer whose
// metadata lands inside a neighbour.
class ScribblingHeap : public SizeHeap<MallocHeap> {
 public:
  void* malloc(std::size_t size) {
    void* object = SizeHeap<MallocHeap>::malloc(size);
    if (++mallocs_ % 50 == 0 && !live_.empty()) std::memset(*live_.begin(), 0xAB, 1);
    if (size >= 8) live_.insert(object);
    return object;
  }
  void free(void* object) {
    live_.erase(object);
    SizeHeap<MallocHeap>::free(object);
  }

 private:
  std::set<void*> live_;
  std::size_t mallocs_ = 0;
};

template <class H>
bool modelCheckFails() {
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD,
                                                         &failures);
    H heap;
    ModelChecker<H> checker(heap, 3);
    ModelCheckOptions options;
    options.operations = 3000;
    checker.run(standardDistributions()[0], options);
  }
  return failures.size() > 0;
}

TEST(ModelCheckHarness, CatchesOverlappingObjects) { EXPECT_TRUE(modelCheckFails<OverlappingHeap>()); }
TEST(ModelCheckHarness, CatchesCorruptedContents) { EXPECT_TRUE(modelCheckFails<ScribblingHeap>()); }
TEST(ModelCheckHarness, PassesACorrectHeap) { EXPECT_FALSE(modelCheckFails<SizeHeap<MallocHeap>>()); }

}  // namespace
}  // namespace heapkit::testing
