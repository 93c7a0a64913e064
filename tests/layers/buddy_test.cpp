// BuddyHeap: the model check over every kind and policy, over an ArenaHeap and an audited
// MallocHeap; the buddy-tree invariants after random operations; hand-computed traces of
// each kind; and the compile-time configuration deciding exactly as the run-time one.
// Every test's name starts with "buddy" so that `ctest -R buddy` (case-sensitive) runs them.
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "heapkit/general/BuddyHeap.h"
#include "heapkit/top/ArenaHeap.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit {
// Parameter names in gtest's messages instead of a byte dump.
inline void PrintTo(BuddyKind kind, std::ostream* out) {
  constexpr const char* kNames[] = {"Binary", "Fibonacci", "Weighted", "Double"};
  *out << kNames[static_cast<int>(kind)];
}
}  // namespace heapkit

namespace heapkit::testing {
namespace {

using CountedArena = ReservedArena<CountedMemory>;
using CountedTop = ArenaHeap<CountedArena>;
using ArenaBuddy = BuddyHeap<BuddyConfig, CountedTop>;
using AuditedBuddy = BuddyHeap<BuddyConfig, AuditedTop>;

constexpr std::size_t kTestReserveBytes = std::size_t{4} << 30;
constexpr std::uint8_t kOwner = 1;

const char* kindName(BuddyKind kind) {
  switch (kind) {
    case BuddyKind::Binary: return "Binary";
    case BuddyKind::Fibonacci: return "Fibonacci";
    case BuddyKind::Weighted: return "Weighted";
    case BuddyKind::Double: return "Double";
  }
  return "?";
}

constexpr BuddyKind kAllKinds[] = {BuddyKind::Binary, BuddyKind::Fibonacci, BuddyKind::Weighted, BuddyKind::Double};

static_assert(CountingHeap<ArenaBuddy>, "counts reach the arena through the layer");
static_assert(!CountingHeap<AuditedBuddy>, "over a top heap that does not count, counting compiles to nothing");
static_assert(SizeWordHeap<AuditedBuddy>);

// --- what a block of each kind splits into, derived here independently of the heap ---

struct Children {
  std::size_t left;
  std::size_t right;
};

// Fibonacci sizes for a smallest block of 32: 32, 48 (1.5 x 32), then sums.
std::vector<std::size_t> fibonacciBytes() {
  std::vector<std::size_t> series{32, 48};
  while (series.back() < (std::size_t{1} << 40)) series.push_back(series[series.size() - 1] + series[series.size() - 2]);
  return series;
}

// The children of a block of `bytes` (smallest block 32), or nothing when it cannot split.
std::optional<Children> childrenOf(BuddyKind kind, std::size_t bytes) {
  constexpr std::size_t kSmallest = 32;
  switch (kind) {
    case BuddyKind::Binary:
    case BuddyKind::Double:  // each of its two series halves
      if (bytes / 2 >= kSmallest) return Children{bytes / 2, bytes / 2};
      return std::nullopt;
    case BuddyKind::Weighted:
      if (isPowerOfTwo(bytes / 16)) {  // 2^k -> 3 * 2^(k-2) + 2^(k-2)
        if (bytes / 4 >= kSmallest) return Children{3 * bytes / 4, bytes / 4};
      } else if (bytes / 3 >= kSmallest) {  // 3 * 2^k -> 2^(k+1) + 2^k
        return Children{2 * bytes / 3, bytes / 3};
      }
      return std::nullopt;
    case BuddyKind::Fibonacci: {
      std::vector<std::size_t> series = fibonacciBytes();
      for (std::size_t k = 2; k < series.size(); ++k) {
        if (series[k] == bytes) return Children{series[k - 1], series[k - 2]};
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// --- the invariants, checked on the heap's own walk of its areas ------------------------

struct Tile {
  std::size_t bytes;
  bool free;
};

// Rebuilds an area's buddy tree from its blocks, top down with the split rules above.
class AreaTreeCheck {
 public:
  AreaTreeCheck(BuddyKind kind, bool coalesce, const std::map<std::size_t, Tile>& tiles)
      : kind_(kind), coalesce_(coalesce), tiles_(tiles) {}

  // Whether the node [offset, offset + bytes) is a single free block.
  bool coverNode(std::size_t offset, std::size_t bytes) {
    auto tile = tiles_.find(offset);
    if (tile == tiles_.end()) {
      ADD_FAILURE() << "no block starts at offset " << offset << ", inside a node of " << bytes << " bytes";
      return false;
    }
    if (tile->second.bytes == bytes) {
      ++tilesCovered_;
      return tile->second.free;
    }
    std::optional<Children> children = childrenOf(kind_, bytes);
    if (!children || tile->second.bytes > bytes) {
      ADD_FAILURE() << "block of " << tile->second.bytes << " bytes at offset " << offset
                    << " is not a node of the buddy tree (inside a node of " << bytes << " bytes)";
      return false;
    }
    bool leftFree = coverNode(offset, children->left);
    bool rightFree = coverNode(offset + children->left, children->right);
    if (coalesce_ && leftFree && rightFree) {
      ADD_FAILURE() << "free buddies of " << children->left << " and " << children->right << " bytes at offset " << offset
                    << " were not merged";
    }
    return false;
  }

  std::size_t tilesCovered() const { return tilesCovered_; }

 private:
  BuddyKind kind_;
  bool coalesce_;
  const std::map<std::size_t, Tile>& tiles_;
  std::size_t tilesCovered_ = 0;
};

template <class H>
void checkBuddyInvariants(H& heap, const BuddyConfig& config, const std::vector<void*>& live) {
  std::map<std::size_t, std::map<std::size_t, Tile>> tilesByArea;
  std::map<std::size_t, std::size_t> areaBytes;
  std::map<void*, std::size_t> inUse;  // object -> block bytes
  std::size_t freeBlocks = 0;
  heap.forEachBlock([&](const BuddyBlockInfo& block) {
    tilesByArea[block.area][block.offset] = {block.bytes, block.free};
    areaBytes[block.area] = block.areaBytes;
    if (block.free) ++freeBlocks;
    else inUse[block.object] = block.bytes;
  });
  for (auto& [area, tiles] : tilesByArea) {
    SCOPED_TRACE("area " + std::to_string(area) + " of " + std::to_string(areaBytes[area]) + " bytes");
    // The blocks tile the area exactly: each starts where the previous one ends.
    std::size_t expectedOffset = 0;
    for (auto& [offset, tile] : tiles) {
      ASSERT_EQ(offset, expectedOffset) << "gap or overlap";
      ASSERT_EQ(offset % 16, 0u);
      expectedOffset += tile.bytes;
    }
    ASSERT_EQ(expectedOffset, areaBytes[area]) << "blocks do not end at the area's end";
    // And they are the leaves of a buddy tree of the kind.
    AreaTreeCheck tree(config.kind, config.coalesce, tiles);
    bool wholeAreaFree = tree.coverNode(0, areaBytes[area]);
    EXPECT_EQ(tree.tilesCovered(), tiles.size());
    if (config.coalesce && config.trim) {
      EXPECT_FALSE(wholeAreaFree) << "a wholly free area was kept despite trim";
    }
  }
  EXPECT_EQ(heap.freeListedBlocks(), freeBlocks) << "the free lists and the free blocks disagree";
  EXPECT_EQ(inUse.size(), live.size());
  for (void* object : live) {
    auto block = inUse.find(object);
    ASSERT_NE(block, inUse.end()) << "a live object is not an in-use block";
    EXPECT_EQ(heap.getSize(object), block->second - 16);
  }
}

// --- 1. the model check ----------------------------------------------------------------

enum class TopKind { Arena, Audited };
void PrintTo(TopKind top, std::ostream* out) { *out << (top == TopKind::Arena ? "Arena" : "Audited"); }
using ModelCheckParam = std::tuple<BuddyKind, bool, bool, TopKind>;

class BuddyModelCheck : public ::testing::TestWithParam<ModelCheckParam> {};

template <class H>
void runModelCheck(H& heap, const SizeDistribution& sizes, std::uint64_t seed, const ModelCheckOptions& options) {
  ModelChecker<H> checker(heap, seed);
  checker.run(sizes, options);
}

TEST_P(BuddyModelCheck, RandomOperationsKeepEveryObjectIntact) {
  auto [kind, coalesce, trim, top] = GetParam();
  BuddyConfig config{kind, 32, 64 * 1024, coalesce, trim};
  ModelCheckOptions options;
  for (const SizeDistribution& sizes : standardDistributions()) {
    bool large = sizes.name == "large";
    options.operations = large ? 1000 : 8000;
    options.maxLiveObjects = large ? 40 : 1000;
    for (std::uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(sizes.name + " seed " + std::to_string(seed));
      if (top == TopKind::Arena) {
        CountedArena arena(kTestReserveBytes);
        {
          ArenaBuddy heap(config, arena, kOwner);
          runModelCheck(heap, sizes, seed, options);
          if (::testing::Test::HasFatalFailure()) return;
          if (trim) {
            EXPECT_EQ(arena.bytesHeld(), 0u) << "every object was freed: trim gives every area back";
          }
          EXPECT_FALSE(arena.exhausted());
        }
        EXPECT_EQ(arena.bytesHeld(), 0u) << "the destructor gives every area back";
      } else {
        TeardownAudit::leftoverBytes = 0;
        std::size_t teardownsBefore = TeardownAudit::teardowns;
        {
          AuditedBuddy heap(config);
          runModelCheck(heap, sizes, seed, options);
          if (::testing::Test::HasFatalFailure()) return;
          if (trim) {
            EXPECT_EQ(heap.bytesHeld(), 0u);
          }
        }
        EXPECT_GT(TeardownAudit::teardowns, teardownsBefore);
        EXPECT_EQ(TeardownAudit::leftoverBytes, 0u) << "the heap kept memory after it was destroyed";
      }
    }
  }
}

std::string modelCheckName(const ::testing::TestParamInfo<ModelCheckParam>& info) {
  auto [kind, coalesce, trim, top] = info.param;
  return std::string(kindName(kind)) + (coalesce ? "_Coalesce" : "_NoCoalesce") + (trim ? "_Trim" : "_NoTrim") +
         (top == TopKind::Arena ? "_OverArena" : "_OverMalloc");
}

INSTANTIATE_TEST_SUITE_P(buddy, BuddyModelCheck,
                         ::testing::Combine(::testing::ValuesIn(kAllKinds), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(TopKind::Arena, TopKind::Audited)),
                         modelCheckName);

// --- 2. the buddy invariants after random operations -----------------------------------

using PolicyParam = std::tuple<BuddyKind, bool, bool>;
class BuddyInvariants : public ::testing::TestWithParam<PolicyParam> {};

TEST_P(BuddyInvariants, BlocksTileAreasAsABuddyTreeAndFreeBuddiesAreMerged) {
  auto [kind, coalesce, trim] = GetParam();
  // Small areas, so that areas fill, requests outgrow them and trim has work to do.
  BuddyConfig config{kind, 32, 16 * 1024, coalesce, trim};
  AuditedBuddy heap(config);
  std::mt19937_64 rng(42);
  std::vector<void*> live;
  auto drawSize = [&rng]() -> std::size_t {
    unsigned choice = static_cast<unsigned>(rng() % 100);
    if (choice < 80) return rng() % 600;
    if (choice < 97) return 600 + rng() % 6000;
    return 20000 + rng() % 60000;  // an area of its own
  };
  for (int step = 0; step < 4000; ++step) {
    if (!live.empty() && rng() % 100 < 45) {
      std::size_t index = rng() % live.size();
      heap.free(live[index]);
      live[index] = live.back();
      live.pop_back();
    } else {
      void* object = heap.malloc(drawSize());
      ASSERT_NE(object, nullptr);
      live.push_back(object);
    }
    if (step % 250 == 0) {
      SCOPED_TRACE("after step " + std::to_string(step));
      checkBuddyInvariants(heap, config, live);
      if (::testing::Test::HasFailure()) return;
    }
  }
  checkBuddyInvariants(heap, config, live);
  for (void* object : live) heap.free(object);
  live.clear();
  checkBuddyInvariants(heap, config, live);
  std::size_t areas = 0, blocks = 0;
  heap.forEachBlock([&](const BuddyBlockInfo& block) {
    ++blocks;
    if (block.offset == 0) ++areas;
  });
  if (trim) {
    EXPECT_EQ(blocks, 0u) << "every area was wholly free, so every area went back";
    EXPECT_EQ(heap.bytesHeld(), 0u);
  } else if (coalesce) {
    EXPECT_EQ(blocks, areas) << "every area merged back into its root";
  }
}

std::string policyName(const ::testing::TestParamInfo<PolicyParam>& info) {
  auto [kind, coalesce, trim] = info.param;
  return std::string(kindName(kind)) + (coalesce ? "_Coalesce" : "_NoCoalesce") + (trim ? "_Trim" : "_NoTrim");
}

INSTANTIATE_TEST_SUITE_P(buddy, BuddyInvariants,
                         ::testing::Combine(::testing::ValuesIn(kAllKinds), ::testing::Bool(), ::testing::Bool()),
                         policyName);

// --- 3. hand-computed traces -------------------------------------------------------------

// A buddy heap over a counted arena, and the numbers a trace checks.
class Traced {
 public:
  explicit Traced(BuddyKind kind, bool coalesce = true, bool trim = true)
      : arena_(std::size_t{1} << 30), heap_(BuddyConfig{kind, 32, 4096, coalesce, trim}, arena_, kOwner) {}

  ArenaBuddy& heap() { return heap_; }
  CountedArena& arena() { return arena_; }
  std::uint64_t splits() { return arena_.workCounts().splits; }
  std::uint64_t coalesces() { return arena_.workCounts().coalesces; }

  // malloc(size), which must give the block of `bytes` at `offset` and bring the splits
  // so far to `splitsInAll`.
  void* mallocAt(std::size_t size, std::size_t offset, std::size_t bytes, std::uint64_t splitsInAll) {
    void* object = heap_.malloc(size);
    EXPECT_EQ(blockOf(object), std::make_pair(offset, bytes)) << "malloc(" << size << ")";
    EXPECT_EQ(splits(), splitsInAll) << "malloc(" << size << ") at " << offset;
    return object;
  }
  // free(object), which must bring the merges so far to `coalescesInAll`.
  void freeMerging(void* object, std::uint64_t coalescesInAll) {
    std::size_t offset = blockOf(object).first;
    heap_.free(object);
    EXPECT_EQ(coalesces(), coalescesInAll) << "free of the block at " << offset;
  }

  // Offset within its area and bytes of the block holding `object`.
  std::pair<std::size_t, std::size_t> blockOf(void* object) {
    std::pair<std::size_t, std::size_t> found{SIZE_MAX, 0};
    heap_.forEachBlock([&](const BuddyBlockInfo& block) {
      if (block.object == object) found = {block.offset, block.bytes};
    });
    return found;
  }
  // Every block of every area as (area bytes, offset, bytes, free), address order within an area.
  std::vector<std::tuple<std::size_t, std::size_t, std::size_t, bool>> blocks() {
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t, bool>> all;
    heap_.forEachBlock([&](const BuddyBlockInfo& block) { all.emplace_back(block.areaBytes, block.offset, block.bytes, block.free); });
    return all;
  }
  // The ArenaHeap puts the first area at the arena's base, after its 16-byte header; the
  // area's 32-byte prefix, then the root block's 16-byte header precede the first object.
  char* firstObjectOfArea(std::size_t granule) const { return arena_.base() + granule * CountedArena::kGranuleBytes + 16 + 32 + 16; }

 private:
  CountedArena arena_;
  ArenaBuddy heap_;
};

using BlockRow = std::tuple<std::size_t, std::size_t, std::size_t, bool>;  // area bytes, offset, bytes, free

TEST(buddyTrace, BinarySplitsDownToTheRequestAndMergesBack) {
  Traced t(BuddyKind::Binary);
  // malloc(100): usable 112, block 128 (index 2 of 32, 64, 128, ...). The area's root is
  // 4096 (the largest power-of-two multiple of 32 within 4096) and splits
  // 4096 -> 2048 -> 1024 -> 512 -> 256 -> 128: five splits, the right halves freed.
  void* a = t.mallocAt(100, 0, 128, 5);
  EXPECT_EQ(static_cast<char*>(a), t.firstObjectOfArea(0));
  EXPECT_EQ(t.heap().getSize(a), 112u);
  EXPECT_EQ(sizeword::size(a), 112u) << "the size word before the object";
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{4096, 0, 128, false}, {4096, 128, 128, true}, {4096, 256, 256, true},
                                                {4096, 512, 512, true}, {4096, 1024, 1024, true}, {4096, 2048, 2048, true}}));
  // The arena holds one extent: 16 (its header) + 32 (area prefix) + 4096 = 4144 bytes,
  // two pages.
  EXPECT_EQ(t.arena().bytesHeld(), 8192u);
  // The second malloc(100) takes the free 128 at offset 128: no split.
  void* b = t.mallocAt(100, 128, 128, 5);
  EXPECT_EQ(static_cast<char*>(b), t.firstObjectOfArea(0) + 128);
  // Freeing a: its buddy (offset 128) is in use, no merge. Freeing b: 128+128 -> 256 ->
  // 512 -> 1024 -> 2048 -> 4096, five merges, and the whole area goes back.
  t.freeMerging(a, 0);
  t.freeMerging(b, 5);
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
  EXPECT_TRUE(t.blocks().empty());
}

TEST(buddyTrace, BinaryAdjacentFreeBlocksThatAreNotBuddiesStayApart) {
  Traced t(BuddyKind::Binary);
  // Four 128-byte blocks: 0 (splits as above), 128 (free), 256 (from the free 256 at 256,
  // split once: 256 -> 128 + 128), 384 (its free right half).
  void* objects[4];
  for (void*& object : objects) object = t.heap().malloc(100);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.blockOf(objects[i]).first, 128u * i);
  EXPECT_EQ(t.splits(), 6u);
  // 128 and 256 are neighbours but not buddies (128's buddy is 0, 256's is 384).
  t.heap().free(objects[1]);
  t.freeMerging(objects[2], 0);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{4096, 0, 128, false}, {4096, 128, 128, true}, {4096, 256, 128, true},
                                                {4096, 384, 128, false}, {4096, 512, 512, true}, {4096, 1024, 1024, true},
                                                {4096, 2048, 2048, true}}));
  // Freeing 0 merges it with 128 into 256 at 0, whose buddy (256 at 256) is split: stop.
  t.freeMerging(objects[0], 1);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{4096, 0, 256, true}, {4096, 256, 128, true}, {4096, 384, 128, false},
                                                {4096, 512, 512, true}, {4096, 1024, 1024, true}, {4096, 2048, 2048, true}}));
  // Freeing 384: 256 at 256, then 512, 1024, 2048, 4096: five merges, the area goes back.
  t.freeMerging(objects[3], 6);
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
}

TEST(buddyTrace, BinaryWithoutTrimKeepsTheWholeArea) {
  Traced t(BuddyKind::Binary, true, false);
  void* a = t.heap().malloc(100);
  t.heap().free(a);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{4096, 0, 4096, true}}));
  EXPECT_EQ(t.arena().bytesHeld(), 8192u);
  // Reused: the same block, split again the same way.
  EXPECT_EQ(t.heap().malloc(100), a);
  EXPECT_EQ(t.splits(), 10u);
}

TEST(buddyTrace, BinaryWithoutCoalescingKeepsBlocksAtTheirSize) {
  Traced t(BuddyKind::Binary, false, false);
  void* a = t.heap().malloc(100);
  void* b = t.heap().malloc(100);
  t.heap().free(a);
  t.freeMerging(b, 0);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{4096, 0, 128, true}, {4096, 128, 128, true}, {4096, 256, 256, true},
                                                {4096, 512, 512, true}, {4096, 1024, 1024, true}, {4096, 2048, 2048, true}}));
  // LIFO: b's block was freed last, so it is reused first.
  EXPECT_EQ(t.heap().malloc(100), b);
}

TEST(buddyTrace, BinaryWithoutCoalescingTrimsAnAreaWithNoLiveBlock) {
  Traced t(BuddyKind::Binary, false, true);
  void* a = t.heap().malloc(100);
  void* b = t.heap().malloc(100);
  t.heap().free(a);
  EXPECT_EQ(t.arena().bytesHeld(), 8192u);
  t.heap().free(b);
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
  EXPECT_EQ(t.heap().freeListedBlocks(), 0u) << "the area's free blocks left the lists with it";
}

TEST(buddyTrace, Fibonacci) {
  Traced t(BuddyKind::Fibonacci);
  // Sizes (index: bytes): 0:32 1:48 2:80 3:128 4:208 5:336 6:544 7:880 8:1424 9:2304
  // 10:3728 11:6032. The root is 3728 (the largest within 4096). F(k) splits into F(k-1)
  // (left) + F(k-2) (right); the kept child is the smaller one that can still be cut to
  // exactly 128 (index 3).
  // malloc(100) -> 128:
  //   3728@0    -> 2304@0 (free)    + 1424@2304 (kept: right, index 8 >= 3)
  //   1424@2304 -> 880@2304 (free)  + 544@3184  (kept)
  //   544@3184  -> 336@3184 (free)  + 208@3520  (kept)
  //   208@3520  -> 128@3520 (kept: the right, 80, is too small) + 80@3648 (free)
  void* a = t.mallocAt(100, 3520, 128, 4);
  EXPECT_EQ(static_cast<char*>(a), t.firstObjectOfArea(0) + 3520);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{3728, 0, 2304, true}, {3728, 2304, 880, true}, {3728, 3184, 336, true},
                                                {3728, 3520, 128, false}, {3728, 3648, 80, true}}));
  // 16 + 32 + 3728 = 3776 bytes: one page.
  EXPECT_EQ(t.arena().bytesHeld(), 4096u);
  // malloc(100) again: no free 128 or 208; the 336 at 3184 splits into 208@3184 (free) +
  // 128@3392 (kept).
  void* b = t.mallocAt(100, 3392, 128, 5);
  // free(a): 128@3520 is the left child of 208@3520; its buddy 80@3648 is free: merge.
  // 208@3520 is the right child of 544@3184; its buddy 336@3184 is split (208@3184 is
  // there): stop. One merge.
  t.freeMerging(a, 1);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{3728, 0, 2304, true}, {3728, 2304, 880, true}, {3728, 3184, 208, true},
                                                {3728, 3392, 128, false}, {3728, 3520, 208, true}}));
  // The two free 208s are the same size and not buddies: 208@3184 is the left child of
  // 336@3184, 208@3520 the right child of 544@3184.
  // free(b): 128@3392 + 208@3184 -> 336@3184; + 208@3520 -> 544@3184; + 880@2304 ->
  // 1424@2304; + 2304@0 -> 3728@0, the root: four merges, and the area goes back.
  t.freeMerging(b, 5);
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
}

TEST(buddyTrace, Weighted) {
  Traced t(BuddyKind::Weighted);
  // Sizes (index: bytes): even 32 * 2^k, odd 48 * 2^k: 0:32 1:48 2:64 3:96 4:128 5:192
  // 6:256 7:384 8:512 9:768 10:1024 11:1536 12:2048 13:3072 14:4096. The root is 4096.
  // 2^k -> 3*2^(k-2) (left) + 2^(k-2) (right); 3*2^k -> 2^(k+1) (left) + 2^k (right).
  // malloc(100) -> 128 (index 4):
  //   4096@0    -> 3072@0 (free)    + 1024@3072 (kept)
  //   1024@3072 -> 768@3072 (free)  + 256@3840  (kept)
  //   256@3840  -> 192@3840 (kept: the right, 64, is too small) + 64@4032 (free)
  //   192@3840  -> 128@3840 (kept)  + 64@3968 (free)
  void* a = t.mallocAt(100, 3840, 128, 4);
  // malloc(100) again: nothing free from 128 to 512; 768@3072 splits:
  //   768@3072 -> 512@3072 (free) + 256@3584 (kept)
  //   256@3584 -> 192@3584 (kept) + 64@3776 (free)
  //   192@3584 -> 128@3584 (kept) + 64@3712 (free)
  void* b = t.mallocAt(100, 3584, 128, 7);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{4096, 0, 3072, true}, {4096, 3072, 512, true}, {4096, 3584, 128, false},
                                                {4096, 3712, 64, true}, {4096, 3776, 64, true}, {4096, 3840, 128, false},
                                                {4096, 3968, 64, true}, {4096, 4032, 64, true}}));
  // The free 64s at 3712 and 3776 are neighbours of one size but not buddies (3712's
  // buddy is b's 128, 3776's is the 192 at 3584): they stay apart, as the walk shows.
  // free(b): + 64@3712 -> 192@3584; + 64@3776 -> 256@3584; + 512@3072 -> 768@3072, whose
  // buddy 256@3840 is split (a's 128 is there): three merges.
  t.freeMerging(b, 3);
  EXPECT_EQ(t.blocks(), (std::vector<BlockRow>{{4096, 0, 3072, true}, {4096, 3072, 768, true}, {4096, 3840, 128, false},
                                                {4096, 3968, 64, true}, {4096, 4032, 64, true}}));
  // free(a): + 64@3968 -> 192@3840; + 64@4032 -> 256@3840; + 768@3072 -> 1024@3072;
  // + 3072@0 -> 4096@0: four merges, and the area goes back.
  t.freeMerging(a, 7);
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
}

TEST(buddyTrace, WeightedNeverFormsOneAndAHalfTimesTheSmallestBlock) {
  Traced t(BuddyKind::Weighted);
  // malloc(20): usable 32, block 48, which no split forms (64 -> 48 + 16 is below the
  // smallest block): it gets 64. The root 4096 -> 3072 + 1024 (kept) -> 768 + 256 (kept)
  // -> 192 + 64 (kept; the right child, and 64 is the target).
  void* object = t.mallocAt(20, 4032, 64, 3);
  EXPECT_EQ(t.heap().getSize(object), 48u);
  // malloc(1): block 32. The first free block that holds it is 192@3840 (three-type):
  // -> 128@3840 + 64@3968; the 64 cannot be cut (64 -> 48 + 16), so the 128 is kept
  // (64@3968 freed), and 128@3840 -> 96@3840 (free) + 32@3936 (kept).
  void* small = t.mallocAt(1, 3936, 32, 5);
  // free(object): 64@4032 is the right child of 256@3840, whose left child 192@3840 is
  // split: no merge. free(small): + 96@3840 -> 128@3840; + 64@3968 -> 192@3840;
  // + 64@4032 -> 256@3840; + 768@3072 -> 1024@3072; + 3072@0 -> 4096: five merges.
  t.freeMerging(object, 0);
  t.freeMerging(small, 5);
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
}

TEST(buddyTrace, DoubleSendsEachRequestToTheSystemWithTheSmallerBlock) {
  Traced t(BuddyKind::Double);
  // Two binary systems: 32 * 2^k (roots of 4096) and 48 * 2^k (roots of 3072, the
  // largest 48 * 2^k within 4096), in areas of their own.
  // malloc(100): block 128 (the other system's would be 192): a 4096 area, halved five
  // times, 128@0.
  void* a = t.mallocAt(100, 0, 128, 5);
  EXPECT_EQ(static_cast<char*>(a), t.firstObjectOfArea(0));
  // malloc(80): usable 80, block 96 (the other system's would be 128): a 3072 area,
  // 3072 -> 1536 -> 768 -> 384 -> 192 -> 96, 96@0. The arena starts each extent on a
  // 64 KiB granule: this one is the second.
  void* c = t.mallocAt(80, 0, 96, 10);
  EXPECT_EQ(static_cast<char*>(c), t.firstObjectOfArea(1));
  EXPECT_EQ(t.heap().getSize(c), 80u);
  // Extents: 16 + 32 + 4096 = 4144 -> 8192; 16 + 32 + 3072 = 3120 -> 4096.
  EXPECT_EQ(t.arena().bytesHeld(), 8192u + 4096u);
  // malloc(100) again: the free 128@128 of the first area.
  void* b = t.mallocAt(100, 128, 128, 10);
  EXPECT_EQ(static_cast<char*>(b), t.firstObjectOfArea(0) + 128);
  t.freeMerging(a, 0);
  t.freeMerging(b, 5);  // 128 + 128 -> 256 -> ... -> 4096: the first area goes back
  EXPECT_EQ(t.arena().bytesHeld(), 4096u);
  t.freeMerging(c, 10);  // 96 + 96 -> 192 -> ... -> 3072: the second area goes back
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
}

TEST(buddyTrace, ARequestLargerThanAnAreaGetsAnAreaOfItsOwn) {
  Traced t(BuddyKind::Binary);
  // malloc(5000): block 5000 + 16 -> 8192, larger than the 4096 root: an area of 8192,
  // allocated whole (16 + 32 + 8192 = 8240 bytes -> three pages).
  void* big = t.mallocAt(5000, 0, 8192, 0);
  EXPECT_EQ(t.heap().getSize(big), 8176u);
  EXPECT_EQ(t.arena().bytesHeld(), 12288u);
  t.freeMerging(big, 0);
  EXPECT_EQ(t.arena().bytesHeld(), 0u);
}

// --- null propagation and impossible sizes ----------------------------------------------

TEST(buddyContract, NullFromTheParentPropagates) {
  BuddyHeap<BuddyConfig, FailingTop> heap(BuddyConfig{BuddyKind::Fibonacci, 32, 64 * 1024, true, true});
  for (std::size_t size : {0ul, 1ul, 100ul, 5000ul, 1ul << 20}) EXPECT_EQ(heap.malloc(size), nullptr) << size;
  heap.setBudget(100);
  void* object = heap.malloc(64);
  ASSERT_NE(object, nullptr);
  std::memset(object, 1, 64);
  heap.free(object);
}

TEST(buddyContract, ImpossibleSizesFailWithoutAskingTheParent) {
  for (BuddyKind kind : kAllKinds) {
    AuditedBuddy heap(BuddyConfig{kind, 32, 64 * 1024, true, true});
    // The largest block is at most 2^47 bytes; anything larger, and anything over
    // PTRDIFF_MAX, fails before the parent is asked.
    for (std::size_t size : {SIZE_MAX, SIZE_MAX - 15, std::size_t{PTRDIFF_MAX} + 1, std::size_t{1} << 47, std::size_t{1} << 60}) {
      EXPECT_EQ(heap.malloc(size), nullptr) << kindName(kind) << " " << size;
    }
    EXPECT_EQ(heap.peakBytesHeld(), 0u);
    // malloc(0) is a smallest block, as everywhere in heapkit (16 usable bytes).
    void* zero = heap.malloc(0);
    ASSERT_NE(zero, nullptr);
    EXPECT_EQ(heap.getSize(zero), 16u);
    heap.free(zero);
    heap.free(nullptr);
  }
}

TEST(buddyContract, ComposesUnderTheMallocWrapper) {
  ANSIWrapper<AuditedBuddy> heap(BuddyConfig{BuddyKind::Weighted, 32, 64 * 1024, true, true});
  void* aligned = heap.memalign(256, 100);
  ASSERT_NE(aligned, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned) % 256, 0u);
  EXPECT_GE(heap.getSize(aligned), 100u);
  heap.free(aligned);
  void* grown = heap.realloc(heap.malloc(10), 3000);
  ASSERT_NE(grown, nullptr);
  heap.free(grown);
  EXPECT_EQ(heap.bytesHeld(), 0u);
}

// --- 4. compile-time parameters decide as run-time ones -----------------------------------

template <BuddyKind Kind, bool Coalesce, bool Trim>
struct Constants {
  static constexpr BuddyKind kind = Kind;
  static constexpr std::size_t minBlockBytes = 32;
  static constexpr std::size_t areaBytes = 16 * 1024;
  static constexpr bool coalesce = Coalesce;
  static constexpr bool trim = Trim;
};

static_assert(CompileTimeBuddyParams<Constants<BuddyKind::Binary, true, true>>);
static_assert(!CompileTimeBuddyParams<BuddyConfig>);
static_assert(sizeof(BuddyHeap<Constants<BuddyKind::Binary, true, true>, AuditedTop>) <
                  sizeof(BuddyHeap<BuddyConfig, AuditedTop>),
              "constant parameters and their size table take no room in the heap");

struct Outcome {
  std::vector<std::ptrdiff_t> offsets;  // of every object from the arena's base
  WorkCounts counts;
  std::size_t peakBytes;
};

// One fixed random sequence of mallocs and frees; every object as an offset from the base.
template <class Params, class Memory>
Outcome runSequence(const Params& params, std::uint64_t seed) {
  ReservedArena<Memory> arena(std::size_t{1} << 30);
  BuddyHeap<Params, ArenaHeap<ReservedArena<Memory>>> heap(params, arena, kOwner);
  std::mt19937_64 rng(seed);
  std::vector<void*> live;
  Outcome outcome;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && rng() % 100 < 45) {
      std::size_t index = rng() % live.size();
      heap.free(live[index]);
      live[index] = live.back();
      live.pop_back();
    } else {
      std::size_t size = rng() % 100 < 95 ? rng() % 2000 : 20000 + rng() % 40000;
      void* object = heap.malloc(size);
      EXPECT_NE(object, nullptr);
      outcome.offsets.push_back(static_cast<char*>(object) - arena.base());
      live.push_back(object);
    }
  }
  for (void* object : live) heap.free(object);
  if constexpr (Memory::kCounts) outcome.counts = arena.workCounts();
  outcome.peakBytes = arena.peakBytesHeld();
  return outcome;
}

template <class C>
void expectSameAsRunTime() {
  SCOPED_TRACE(std::string(kindName(C::kind)) + (C::coalesce ? " coalesce" : "") + (C::trim ? " trim" : ""));
  BuddyConfig config{C::kind, C::minBlockBytes, C::areaBytes, C::coalesce, C::trim};
  Outcome constant = runSequence<C, CountedMemory>(C{}, 7);
  Outcome value = runSequence<BuddyConfig, CountedMemory>(config, 7);
  EXPECT_EQ(constant.offsets, value.offsets);
  EXPECT_EQ(constant.peakBytes, value.peakBytes);
  EXPECT_EQ(constant.counts.steps, value.counts.steps);
  EXPECT_EQ(constant.counts.reads, value.counts.reads);
  EXPECT_EQ(constant.counts.writes, value.counts.writes);
  EXPECT_EQ(constant.counts.splits, value.counts.splits);
  EXPECT_EQ(constant.counts.coalesces, value.counts.coalesces);
  EXPECT_GT(value.counts.splits, 0u);
  if (C::coalesce) {
    EXPECT_GT(value.counts.coalesces, 0u);
  }
  // Simulated memory (the application's data never written) places every object alike.
  Outcome simulated = runSequence<BuddyConfig, SimulatedMemory>(config, 7);
  EXPECT_EQ(simulated.offsets, value.offsets);
  EXPECT_EQ(simulated.peakBytes, value.peakBytes);
}

template <BuddyKind Kind>
void expectSameAsRunTimeForEveryPolicy() {
  expectSameAsRunTime<Constants<Kind, true, true>>();
  expectSameAsRunTime<Constants<Kind, true, false>>();
  expectSameAsRunTime<Constants<Kind, false, true>>();
  expectSameAsRunTime<Constants<Kind, false, false>>();
}

TEST(buddyCompileTimeParams, DecideExactlyAsRunTimeParams) {
  expectSameAsRunTimeForEveryPolicy<BuddyKind::Binary>();
  expectSameAsRunTimeForEveryPolicy<BuddyKind::Fibonacci>();
  expectSameAsRunTimeForEveryPolicy<BuddyKind::Weighted>();
  expectSameAsRunTimeForEveryPolicy<BuddyKind::Double>();
}

TEST(buddyCompileTimeParams, DefaultConstructible) {
  BuddyHeap<Constants<BuddyKind::Fibonacci, true, true>, AuditedTop> heap;
  void* object = heap.malloc(100);
  ASSERT_NE(object, nullptr);
  EXPECT_EQ(heap.getSize(object), 112u);
  heap.free(object);
  EXPECT_EQ(heap.bytesHeld(), 0u);
}

}  // namespace
}  // namespace heapkit::testing
