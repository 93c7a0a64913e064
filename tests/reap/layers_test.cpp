// The special-purpose layers (ZoneHeap, XallocHeap, ObstackHeap, ReapHeap): the
// randomized model check every heapkit layer goes through, then each layer's own
// behaviour, over AuditedTop so that every test also checks the teardown.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "heapkit/special/ObstackHeap.h"
#include "heapkit/special/ReapHeap.h"
#include "heapkit/special/XallocHeap.h"
#include "heapkit/special/ZoneHeap.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

// ---------------------------------------------------------------- model checks

template <class H, bool FreesObjects>
struct Case {
  using Heap = H;
  static constexpr bool kFreesObjects = FreesObjects;
};

using Cases = ::testing::Types<Case<ZoneHeap<AuditedTop>, false>, Case<XallocHeap<8192, AuditedTop>, true>,
                               Case<ObstackHeap<4064, AuditedTop>, false>, Case<ReapHeap<AuditedTop>, true>,
                               Case<ReapHeap<FailingTop>, true>>;

template <class C>
class SpecialModelCheck : public ::testing::Test {};
TYPED_TEST_SUITE(SpecialModelCheck, Cases);

TYPED_TEST(SpecialModelCheck, RandomOperationsKeepEveryObjectIntact) {
  using C = TypeParam;
  using H = typename C::Heap;
  for (const SizeDistribution& sizes : standardDistributions()) {
    ModelCheckOptions options;
    if (sizes.name == "large") {
      // Layers that never free single objects would only measure the machine here.
      if (!C::kFreesObjects) continue;
      options.operations = 600;
      options.maxLiveObjects = 30;
    } else {
      options.operations = 8000;
      options.maxLiveObjects = 1000;
    }
    for (std::uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(sizes.name + " seed " + std::to_string(seed));
      TeardownAudit::leftoverBytes = 0;
      {
        auto heap = std::make_unique<H>();
        if constexpr (std::is_base_of_v<FailingTop, H>) {
          heap->setBudget(SIZE_MAX);
        }
        ModelChecker<H> checker(*heap, seed);
        checker.run(sizes, options);
        if (::testing::Test::HasFatalFailure()) return;
      }
      EXPECT_EQ(TeardownAudit::leftoverBytes, 0u) << "a layer kept memory after it was destroyed";
    }
  }
}

// Objects stay intact across clear(): a model check, a clear, and another model check
// on the same reap, which must reuse the memory from scratch.
TEST(ReapHeapModelCheck, SurvivesFreeAllBetweenRuns) {
  ReapHeap<AuditedTop> heap;
  for (std::uint64_t seed : {3u, 4u, 5u}) {
    ModelChecker<ReapHeap<AuditedTop>> checker(heap, seed);
    ModelCheckOptions options;
    options.operations = 4000;
    checker.run(standardDistributions()[2], options);
    heap.clear();
    EXPECT_EQ(heap.footprint(), 0u);
    EXPECT_EQ(heap.bytesInUse(), 0u);
  }
}

// Phases of one size each, every object freed at the end of its phase, on one reap: the
// blocks a phase leaves must serve the next phase's sizes intact (merged, then split).
TEST(ReapHeapModelCheck, FreedBlocksServeTheNextPhasesSizes) {
  ReapHeap<AuditedTop> heap;
  std::uint64_t seed = 7;
  for (std::size_t size : {24, 48, 100, 200, 400, 96, 40, 3000, 8}) {
    SizeDistribution around{"around " + std::to_string(size),
                            [size](std::mt19937_64& rng) { return size - size / 4 + rng() % (size / 2 + 1); }};
    SCOPED_TRACE(around.name);
    ModelChecker<ReapHeap<AuditedTop>> checker(heap, ++seed);
    ModelCheckOptions options;
    options.operations = 6000;
    checker.run(around, options);
    if (HasFatalFailure()) return;
    EXPECT_EQ(heap.bytesInUse(), 0u);
  }
}

// ---------------------------------------------------------------- ZoneHeap

TEST(ZoneHeap, BumpsThroughGeometricallyGrowingChunks) {
  ZoneHeap<AuditedTop, 8192, 65536> zone;
  char* previous = static_cast<char*>(zone.malloc(16));
  for (int i = 0; i < 100; ++i) {
    char* object = static_cast<char*>(zone.malloc(16));
    ASSERT_EQ(object, previous + 16) << "objects in one chunk are consecutive";
    previous = object;
  }
  // Fill chunk after chunk: 8 KiB, 16, 32, 64, 64, ... (payload = chunk - 32 bytes).
  std::vector<std::size_t> held;
  std::size_t last = zone.chunkBytes();
  for (int i = 0; i < 20000; ++i) {
    ASSERT_NE(zone.malloc(48), nullptr);
    if (zone.chunkBytes() != last) {
      held.push_back(zone.chunkBytes() - last);
      last = zone.chunkBytes();
    }
  }
  ASSERT_GE(held.size(), 4u);
  EXPECT_EQ(held[0], 16384u);
  EXPECT_EQ(held[1], 32768u);
  EXPECT_EQ(held[2], 65536u);
  EXPECT_EQ(held[3], 65536u) << "growth stops at MaxChunkBytes";
}

TEST(ZoneHeap, ClearGivesEverythingBackAndStartsOver) {
  AuditedTop* top;
  ZoneHeap<AuditedTop> zone;
  top = &zone;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5000; ++i) std::memset(zone.malloc(40), round, 40);
    ASSERT_NE(zone.malloc(100000), nullptr);  // an own chunk
    EXPECT_GT(top->bytesHeld(), 200000u);
    zone.clear();
    EXPECT_EQ(top->bytesHeld(), 0u);
    EXPECT_EQ(zone.chunkBytes(), 0u);
  }
  EXPECT_GT(zone.peakChunkBytes(), 200000u);
}

TEST(ZoneHeap, CountsBumpedBytesWithoutTheChunksUnusedTails) {
  ZoneHeap<AuditedTop, 8192, 65536> zone;
  EXPECT_EQ(zone.bumpedBytes(), 0u);
  std::size_t expected = 0;
  for (int i = 0; i < 3000; ++i) {
    ASSERT_NE(zone.malloc(1 + i % 200), nullptr);
    expected += usableBytesFor(1 + i % 200);
  }
  ASSERT_NE(zone.malloc(100000), nullptr);  // a chunk of its own
  expected += usableBytesFor(100000);
  void* last = zone.malloc(100);
  ASSERT_TRUE(zone.tryExtend(static_cast<char*>(last) + 112, 64));
  expected += 112 + 64;
  EXPECT_EQ(zone.bumpedBytes(), expected);
  EXPECT_LT(zone.bumpedBytes(), zone.chunkBytes());
  zone.clear();
  EXPECT_EQ(zone.bumpedBytes(), 0u);
}

TEST(ZoneHeap, LargeRequestDoesNotWasteTheCurrentChunk) {
  ZoneHeap<AuditedTop> zone;
  char* a = static_cast<char*>(zone.malloc(32));
  ASSERT_NE(zone.malloc(50000), nullptr);
  char* b = static_cast<char*>(zone.malloc(32));
  EXPECT_EQ(b, a + 32);
}

TEST(ZoneHeap, ImpossibleSizesAndParentFailureGiveNull) {
  ZoneHeap<FailingTop> zone;
  EXPECT_EQ(zone.malloc(SIZE_MAX), nullptr);
  EXPECT_EQ(zone.malloc(SIZE_MAX - 16), nullptr);
  EXPECT_EQ(zone.malloc(16), nullptr) << "the parent said no";
  zone.setBudget(1);
  EXPECT_NE(zone.malloc(16), nullptr);
}

// ---------------------------------------------------------------- XallocHeap

TEST(XallocHeap, FreeingTheLastObjectMovesThePointerBack) {
  XallocHeap<4096, AuditedTop> heap;
  void* a = heap.malloc(100);
  void* b = heap.malloc(100);
  heap.free(b);
  EXPECT_EQ(heap.malloc(100), b);
  // A middle object comes back only once everything above it is freed.
  void* c = heap.malloc(50);
  heap.free(b);
  void* d = heap.malloc(50);
  EXPECT_NE(d, b);
  heap.free(d);
  heap.free(c);
  EXPECT_EQ(heap.malloc(10), b) << "c, d and the freed b popped together";
  (void)a;
}

TEST(XallocHeap, EmptiedChunksGoBackToTheParent) {
  XallocHeap<4096, AuditedTop> heap;
  std::vector<void*> objects;
  for (int i = 0; i < 1000; ++i) objects.push_back(heap.malloc(64));
  std::size_t full = heap.bytesHeld();
  for (auto it = objects.rbegin(); it != objects.rend(); ++it) heap.free(*it);
  EXPECT_LE(heap.bytesHeld(), 4096u + 64) << "one spare chunk at most, from " << full;
  EXPECT_EQ(heap.malloc(SIZE_MAX), nullptr);
}

// ---------------------------------------------------------------- ObstackHeap

TEST(ObstackHeap, GrowsAnObjectAcrossChunksAndKeepsItContiguous) {
  ObstackHeap<4064, AuditedTop> ob;
  char* first = static_cast<char*>(ob.copy0("first", 5));
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(ob.grow1(static_cast<char>('a' + i % 26)));
  EXPECT_EQ(ob.objectSize(), 20000u);
  char* grown = static_cast<char*>(ob.finish());
  for (int i = 0; i < 20000; ++i) ASSERT_EQ(grown[i], 'a' + i % 26);
  EXPECT_STREQ(first, "first");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ob.alloc(1)) % 16, 0u);
}

TEST(ObstackHeap, FreeToAnObjectFreesEverythingAfterIt) {
  ObstackHeap<4064, AuditedTop> ob;
  void* keep = ob.alloc(100);
  void* mark = ob.alloc(10);
  for (int i = 0; i < 1000; ++i) ob.alloc(100);  // spills into more chunks
  std::size_t spilled = ob.bytesHeld();
  EXPECT_TRUE(ob.freeTo(mark));
  EXPECT_LT(ob.bytesHeld(), spilled);
  EXPECT_EQ(ob.alloc(10), mark) << "the next object starts where the freed one did";
  int outside = 0;
  EXPECT_FALSE(ob.freeTo(&outside));
  EXPECT_NE(keep, nullptr);
  ob.clear();
  EXPECT_EQ(ob.bytesHeld(), 0u);
}

TEST(ObstackHeap, ImpossibleSizesFailWithoutChangingTheObject) {
  ObstackHeap<4064, FailingTop> ob;
  ob.setBudget(1);
  ASSERT_TRUE(ob.grow("abc", 3));
  EXPECT_FALSE(ob.blank(SIZE_MAX));
  EXPECT_FALSE(ob.blank(1 << 20)) << "the parent said no";
  EXPECT_EQ(ob.objectSize(), 3u);
  EXPECT_EQ(std::memcmp(ob.base(), "abc", 3), 0);
}

// ---------------------------------------------------------------- ReapHeap

TEST(ReapHeap, RegionModeBumpsWithAnEightByteHeaderPerObject) {
  ReapHeap<AuditedTop> reap;
  static_assert(ReapHeap<AuditedTop>::kHeaderBytes == 8);
  char* a = static_cast<char*>(reap.malloc(24));
  char* b = static_cast<char*>(reap.malloc(24));
  char* c = static_cast<char*>(reap.malloc(40));
  char* d = static_cast<char*>(reap.malloc(0));
  char* e = static_cast<char*>(reap.malloc(1));
  EXPECT_EQ(b, a + 32) << "24 bytes and the next object's header fill 32";
  EXPECT_EQ(c, b + 32);
  EXPECT_EQ(d, c + 48);
  EXPECT_EQ(e, d + 16);
  EXPECT_EQ(reap.getSize(a), 24u);
  EXPECT_EQ(reap.getSize(c), 40u);
  EXPECT_EQ(reap.getSize(d), 8u);
  EXPECT_FALSE(reap.inHeapMode());
  EXPECT_EQ(reap.bytesInUse(), 32u + 32 + 48 + 16 + 16) << "live objects, headers included";
  // Writing every usable byte leaves every header alone.
  for (char* object : {a, b, c, d, e}) std::memset(object, 0xFF, reap.getSize(object));
  EXPECT_EQ(reap.getSize(a), 24u);
  EXPECT_EQ(reap.getSize(e), 8u);
  reap.free(c);
  EXPECT_EQ(reap.bytesInUse(), 32u + 32 + 16 + 16);
  EXPECT_EQ(reap.malloc(40), c);
  EXPECT_EQ(reap.bytesInUse(), 32u + 32 + 48 + 16 + 16);
}

// A 16-byte block (a request of up to 8 bytes, bumped) cannot hold a free block's links:
// freed between objects in use it stays a hole, but it merges with a free neighbour.
TEST(ReapHeap, SixteenByteBlocksMergeWithFreeNeighboursOrStayHoles) {
  ReapHeap<AuditedTop> reap;
  char* a = static_cast<char*>(reap.malloc(8));
  char* b = static_cast<char*>(reap.malloc(8));
  char* c = static_cast<char*>(reap.malloc(8));
  char* d = static_cast<char*>(reap.malloc(8));
  char* e = static_cast<char*>(reap.malloc(200));
  char* guard = static_cast<char*>(reap.malloc(8));
  ASSERT_EQ(c, b + 16);
  ASSERT_EQ(e, a + 64);
  reap.free(b);  // a hole: a and c are in use
  EXPECT_EQ(reap.bytesInUse(), 16u * 4 + 208);
  reap.free(e);
  reap.free(d);  // merges with e
  char* merged = static_cast<char*>(reap.malloc(216));
  EXPECT_EQ(merged, d) << "d and e (16 + 208 bytes) merged";
  EXPECT_EQ(reap.bytesInUse(), 16u * 3 + 224);
  std::memset(merged, 1, 216);
  EXPECT_NE(guard, nullptr);
}

TEST(ReapHeap, BytesInUseIsTheLiveObjectsWithTheirHeaders) {
  ReapHeap<AuditedTop> reap;
  std::vector<void*> live;
  std::uint64_t state = 12345;
  auto next = [&state] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL, state >> 33; };
  for (int i = 0; i < 20000; ++i) {
    std::uint64_t action = next() % 10;
    if (action < 6 || live.empty()) {
      std::size_t size = next() % 16 == 0 ? next() % 300000 : next() % 600;
      live.push_back(reap.malloc(size));
      ASSERT_NE(live.back(), nullptr);
    } else if (action < 9) {
      std::size_t victim = next() % live.size();
      reap.free(live[victim]);
      live[victim] = live.back();
      live.pop_back();
    } else {
      void*& object = live[next() % live.size()];
      object = reap.realloc(object, next() % 2000);
      ASSERT_NE(object, nullptr);
    }
  }
  std::size_t expected = 0;
  for (void* object : live) expected += reap.getSize(object) + ReapHeap<AuditedTop>::kHeaderBytes;
  EXPECT_EQ(reap.bytesInUse(), expected);
  for (void* object : live) reap.free(object);
  EXPECT_EQ(reap.bytesInUse(), 0u);
}

TEST(ReapHeap, TheLeaHeapIsSetUpOnlyByTheFirstFree) {
  ReapHeap<AuditedTop> reap;
  void* a = reap.malloc(100);
  std::size_t footprint = reap.footprint();
  for (int i = 0; i < 50; ++i) reap.malloc(100);
  EXPECT_FALSE(reap.inHeapMode());
  EXPECT_EQ(reap.footprint(), footprint) << "all in the first chunk";
  reap.free(a);
  EXPECT_TRUE(reap.inHeapMode());
  EXPECT_EQ(reap.malloc(100), a);
  reap.clear();
  EXPECT_FALSE(reap.inHeapMode()) << "the Lea heap went with the chunks";
}

TEST(ReapHeap, FreedObjectsAreReusedBeforeBumpingResumes) {
  ReapHeap<AuditedTop> reap;
  std::vector<void*> objects;
  for (int i = 0; i < 100; ++i) objects.push_back(reap.malloc(200));
  std::size_t footprint = reap.footprint();
  for (void* object : objects) reap.free(object);
  EXPECT_TRUE(reap.inHeapMode());
  EXPECT_EQ(reap.bytesInUse(), 0u);
  std::vector<void*> again;
  for (int i = 0; i < 100; ++i) again.push_back(reap.malloc(200));
  std::sort(objects.begin(), objects.end());
  for (void* object : again) EXPECT_TRUE(std::binary_search(objects.begin(), objects.end(), object));
  EXPECT_EQ(reap.footprint(), footprint);
  // The heap is empty now: bumping resumes.
  char* fresh = static_cast<char*>(reap.malloc(200));
  EXPECT_FALSE(std::binary_search(objects.begin(), objects.end(), fresh));
}

TEST(ReapHeap, ABigFreedBlockIsSplitForSmallRequests) {
  ReapHeap<AuditedTop> reap;
  char* big = static_cast<char*>(reap.malloc(4000));
  reap.free(big);
  char* small = static_cast<char*>(reap.malloc(300));
  EXPECT_EQ(small, big);
  EXPECT_EQ(reap.getSize(small), 312u);
  char* next = static_cast<char*>(reap.malloc(300));
  EXPECT_EQ(next, big + 320) << "the rest of the block serves the next request";
  char* tiny = static_cast<char*>(reap.malloc(8));
  EXPECT_EQ(tiny, next + 320) << "and the rest of that the one after";
}

// Freed space of one size serves requests of another: neighbours freed together merge
// into a block that a bigger request takes (ABigFreedBlockIsSplitForSmallRequests: the
// other way round).
TEST(ReapHeap, AdjacentFreedObjectsMergeForABiggerRequest) {
  ReapHeap<AuditedTop> reap;
  char* a = static_cast<char*>(reap.malloc(24));
  char* b = static_cast<char*>(reap.malloc(24));
  char* c = static_cast<char*>(reap.malloc(24));
  char* guard = static_cast<char*>(reap.malloc(24));
  ASSERT_EQ(c, a + 64);
  reap.free(b);
  reap.free(a);
  reap.free(c);
  char* merged = static_cast<char*>(reap.malloc(80));
  EXPECT_EQ(merged, a) << "a, b and c (32 bytes each) merged into one 96-byte block";
  EXPECT_GE(reap.getSize(merged), 80u);
  EXPECT_NE(guard, nullptr);
}

// The reaps paper's footprint claim, as the program tests it: phases of one
// size, each freed whole before the next. A reap that reuses freed space only for the
// same size holds the sum of the phases; one that merges and splits holds about the
// largest phase, as a general-purpose allocator does.
TEST(ReapHeap, FreedSpaceOfOneSizeServesRequestsOfAnother) {
  ReapHeap<AuditedTop> reap;
  std::size_t largestPhase = 0;
  for (std::size_t size : {24, 48, 100, 200, 400, 96, 40}) {
    std::vector<void*> objects;
    for (int i = 0; i < 10000; ++i) {
      objects.push_back(reap.malloc(size));
      ASSERT_NE(objects.back(), nullptr);
      std::memset(objects.back(), 1, size);
    }
    largestPhase = std::max(largestPhase, reap.bytesInUse());
    for (void* object : objects) reap.free(object);
    EXPECT_EQ(reap.bytesInUse(), 0u);
  }
  // 1.3: chunks come in steps of up to 1 MiB (the largest phase holds 4 MB).
  EXPECT_LT(reap.peakFootprint(), largestPhase * 13 / 10) << "largest phase " << largestPhase;
}

TEST(ReapHeap, ObjectsFreedAtTheBumpPointerGoBackToTheRegion) {
  ReapHeap<AuditedTop> reap;
  reap.free(reap.malloc(100));  // heap mode: its Lea heap is carved out after the object
  char* x = static_cast<char*>(reap.malloc(200));
  char* y = static_cast<char*>(reap.malloc(300));
  reap.free(y);
  reap.free(x);
  EXPECT_EQ(reap.bytesInUse(), 0u);
  EXPECT_EQ(reap.malloc(1000), x) << "x and y went back to the unbumped space, which bumping resumes from";
}

TEST(ReapHeap, LargeObjectsGoBackToTheParentWhenFreed) {
  ReapHeap<AuditedTop> reap;
  reap.malloc(100);
  std::size_t before = reap.footprint();
  void* large = reap.malloc(1 << 20);
  EXPECT_GT(reap.footprint(), before + (1 << 20));
  reap.free(large);
  EXPECT_EQ(reap.footprint(), before);
}

TEST(ReapHeap, FreeAllThenReuse) {
  ReapHeap<AuditedTop> reap;
  for (int round = 0; round < 4; ++round) {
    std::vector<char*> objects;
    for (int i = 0; i < 3000; ++i) {
      char* object = static_cast<char*>(reap.malloc(1 + i % 300));
      std::memset(object, round, 1 + i % 300);
      objects.push_back(object);
      if (i % 3 == 0) reap.free(objects[i / 2]), objects[i / 2] = nullptr;
    }
    reap.clear();
    EXPECT_EQ(reap.footprint(), 0u);
    EXPECT_FALSE(reap.inHeapMode());
  }
  EXPECT_GT(reap.peakFootprint(), 0u);
}

TEST(ReapHeap, ReallocGrowsTheLastObjectInPlace) {
  ReapHeap<AuditedTop> reap;
  char* object = static_cast<char*>(reap.realloc(nullptr, 10));
  std::memcpy(object, "0123456789", 10);
  char* grown = static_cast<char*>(reap.realloc(object, 1000));
  EXPECT_EQ(grown, object);
  EXPECT_EQ(std::memcmp(grown, "0123456789", 10), 0);
  reap.malloc(10);
  char* moved = static_cast<char*>(reap.realloc(grown, 2000));
  EXPECT_NE(moved, grown);
  EXPECT_EQ(std::memcmp(moved, "0123456789", 10), 0);
  EXPECT_EQ(reap.realloc(moved, 0), moved) << "shrinking keeps the object";
  EXPECT_EQ(reap.realloc(nullptr, SIZE_MAX), nullptr);
}

TEST(ReapHeap, NullFromTheParentPropagates) {
  ReapHeap<FailingTop> reap;
  EXPECT_EQ(reap.malloc(10), nullptr);
  EXPECT_EQ(reap.malloc(1 << 20), nullptr);
  EXPECT_EQ(reap.malloc(SIZE_MAX), nullptr);
  EXPECT_EQ(reap.bytesInUse(), 0u);
  reap.setBudget(1);
  EXPECT_NE(reap.malloc(10), nullptr);
}

}  // namespace
}  // namespace heapkit::testing
