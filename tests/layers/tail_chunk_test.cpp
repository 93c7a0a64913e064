// TailChunkHeap, the chunk layer of the free-list allocators, on its own (a region) and
// under SegregatedFitHeap: the randomized model check in every header layout and chunk
// policy, by value and by type; what its tails do (carve end to end, hand a retired tail's
// rest up, take a block back, a chunk of its own for a large request, chunks growing to
// their maximum, a wholly free chunk back to the parent when trimming), and every byte back
// to the parent when it is destroyed.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "heapkit/building/TailChunkHeap.h"
#include "heapkit/general/SegregatedFitHeap.h"
#include "heapkit/top/MallocHeap.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

// Counts the chunks the layer holds, as its parent sees them.
class CountingTop : public MallocHeap {
 public:
  void* malloc(std::size_t size) {
    void* chunk = MallocHeap::malloc(size);
    if (chunk != nullptr) {
      ++chunks;
      requested.push_back(size);
    }
    return chunk;
  }
  void free(void* chunk) {
    if (chunk != nullptr) --chunks;
    MallocHeap::free(chunk);
  }
  std::size_t chunks = 0;
  std::vector<std::size_t> requested;
};

template <class Heap>
void modelCheck(Heap& heap, std::uint64_t seed, bool largeSizes) {
  for (const SizeDistribution& sizes : standardDistributions()) {
    if (!largeSizes && sizes.name == "large") continue;  // a region never reuses: only the machine's memory
    SCOPED_TRACE(sizes.name);
    ModelChecker<Heap> checker(heap, seed);
    ModelCheckOptions options;
    options.operations = 3000;
    options.maxLiveObjects = 300;
    checker.run(sizes, options);
  }
}

constexpr HeaderLayout kLayouts[] = {HeaderLayout::SizeWord8, HeaderLayout::SizeWord16, HeaderLayout::BoundaryTags};

TEST(TailChunkHeap, AsARegionPassesTheModelCheckInEveryLayoutAndChunkPolicy) {
  std::uint64_t seed = 1;
  for (HeaderLayout layout : kLayouts) {
    for (ChunkPolicy chunks : {ChunkPolicy{}, ChunkPolicy{4096, 65536, 200, false, false},
                               ChunkPolicy{8192, 8192 * 16, 150, false, false}}) {
      SCOPED_TRACE(static_cast<int>(layout));
      SCOPED_TRACE(chunks.chunkBytes);
      {
        TailChunkHeap<ChunkPolicy, HeaderPolicy, AuditedTop> heap(chunks, HeaderPolicy{layout}, TailClasses{});
        modelCheck(heap, ++seed, false);
      }
      EXPECT_EQ(TeardownAudit::leftoverBytes, 0u) << "chunks kept after the heap was destroyed";
    }
  }
}

TEST(TailChunkHeap, ByTypeItPassesTheModelCheckAndGivesEveryChunkBack) {
  {
    TailChunkHeap<Chunks<4096, 65536, 200>, Headers<HeaderLayout::BoundaryTags>, AuditedTop> heap;
    modelCheck(heap, 7, false);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

// The policies by type and by value make the same heap: the same blocks, one after the
// other, in the same places relative to their chunk.
TEST(TailChunkHeap, ByTypeAndByValueCarveTheSameBlocks) {
  TailChunkHeap<Chunks<4096, 16384, 200>, Headers<HeaderLayout::SizeWord16>, MallocHeap> typed;
  TailChunkHeap<ChunkPolicy, HeaderPolicy, MallocHeap> valued(ChunkPolicy{4096, 16384, 200, false, false},
                                                              HeaderPolicy{HeaderLayout::SizeWord16}, TailClasses{});
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::size_t size = rng() % 1500;
    auto* a = static_cast<char*>(typed.malloc(size));
    auto* b = static_cast<char*>(valued.malloc(size));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(typed.getSize(a), valued.getSize(b));
  }
  std::vector<std::pair<std::size_t, std::size_t>> typedBlocks, valuedBlocks;
  auto record = [](auto& into) {
    return [&into](const void* chunk, const void* block, std::size_t length, bool, bool) {
      into.emplace_back(static_cast<const char*>(block) - static_cast<const char*>(chunk), length);
    };
  };
  typed.forEachBlock(record(typedBlocks));
  valued.forEachBlock(record(valuedBlocks));
  EXPECT_EQ(typedBlocks, valuedBlocks);
  EXPECT_GT(typedBlocks.size(), 1000u);
}

TEST(TailChunkHeap, CarvesEndToEndAndGivesALargeRequestAChunkOfItsOwn) {
  TailChunkHeap<Chunks<65536>, Headers<HeaderLayout::SizeWord8>, CountingTop> heap;
  auto* a = static_cast<char*>(heap.malloc(24));  // a 32-byte block: 8 of header
  auto* b = static_cast<char*>(heap.malloc(40));  // 48
  EXPECT_EQ(b - a, 32);
  EXPECT_EQ(heap.getSize(a), 24u);
  EXPECT_EQ(heap.chunks, 1u);
  // Carved from the tail while it has room, even beyond a quarter chunk...
  auto* big = static_cast<char*>(heap.malloc(60000));
  EXPECT_EQ(big - b, 48);
  EXPECT_EQ(heap.chunks, 1u);
  // ...and once it has not, more than a quarter chunk gets a chunk of its own, exactly its
  // size (and the parent's header), so the tail keeps its room.
  auto* large = static_cast<char*>(heap.malloc(20000));
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(heap.chunks, 2u);
  EXPECT_EQ(heap.requested.back(), 20016u + 32 + 32 - 16);
  auto* c = static_cast<char*>(heap.malloc(8));
  EXPECT_EQ(c - big, 60016);
}

TEST(TailChunkHeap, ChunksGrowByThePolicysPercentUpToItsMaximum) {
  TailChunkHeap<Chunks<4096, 16384, 200>, Headers<HeaderLayout::SizeWord16>, CountingTop> heap;
  for (int i = 0; i < 200; ++i) ASSERT_NE(heap.malloc(500), nullptr);
  ASSERT_GE(heap.requested.size(), 4u);
  // The parent is asked for what fills the chunk with its own header (16 bytes less); the
  // growth is in whole percent of whole hundreds of bytes (4096 / 100 * 200 = 8000).
  EXPECT_EQ(heap.requested[0], 4096u - 16);
  EXPECT_EQ(heap.requested[1], 8000u - 16);
  EXPECT_EQ(heap.requested[2], 16000u - 16);
  EXPECT_EQ(heap.requested[3], 16384u - 16);
}

// The layer-above interface: a retired tail's rest is handed up once a new chunk takes its
// place; a block ending at the tail goes back to it, and with trim a chunk that is wholly
// free again goes back to the parent.
TEST(TailChunkHeap, HandsUpARetiredTailAndTakesBlocksBack) {
  using Heap = TailChunkHeap<Chunks<4096, 4096, 100, /*trim*/ true>, Headers<HeaderLayout::BoundaryTags>, CountingTop>;
  using Layout = Heap::Layout;
  Heap heap;
  std::vector<std::pair<char*, std::size_t>> retired;
  auto keep = [&](char* block, std::size_t word) { retired.emplace_back(block, word); };
  char* first = heap.carve(0, 1008, keep);
  char* second = heap.carve(0, 1008, keep);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(second - first, 1008);
  EXPECT_TRUE(retired.empty());
  Uncounted walk;
  const Layout& layout = heap.layout();
  EXPECT_TRUE(heap.tailFits(0, 1008));
  EXPECT_FALSE(heap.tailFits(0, 4096));
  // The second block gives itself back to the tail that follows it.
  std::size_t word = layout.read(walk, second);
  char* tail = second + Layout::lengthIn(word);
  ASSERT_NE(layout.read(walk, tail) & Layout::kTail, 0u);
  EXPECT_TRUE(heap.giveToTail(second, word, tail, layout.read(walk, tail)));
  EXPECT_EQ(heap.chunks, 1u);
  // The first block is its chunk's first: given back, the chunk is wholly free, and trimmed.
  word = layout.read(walk, first);
  ASSERT_NE(word & Layout::kFirst, 0u);
  tail = first + Layout::lengthIn(word);
  EXPECT_TRUE(heap.giveToTail(first, word, tail, layout.read(walk, tail)));
  EXPECT_EQ(heap.chunks, 0u);
  // A new chunk, then one too many for its tail: the old tail's rest is handed up.
  char* a = nullptr;
  for (int i = 0; i < 3; ++i) a = heap.carve(0, 1008, keep);
  char* a2 = heap.carve(0, 512, keep);
  EXPECT_EQ(a2 - a, 1008);
  EXPECT_EQ(heap.chunks, 1u);
  char* b = heap.carve(0, 1008, keep);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(heap.chunks, 2u);
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_EQ(retired[0].first, a2 + 512);
  EXPECT_EQ(Layout::lengthIn(retired[0].second), 4032u - 3 * 1008 - 512);
  EXPECT_EQ(retired[0].second & Layout::kTail, 0u);
  EXPECT_EQ(Layout::lengthIn(retired[0].second), Layout::lengthIn(layout.read(walk, retired[0].first)));
  EXPECT_FALSE(heap.isWholeChunk(b, layout.read(walk, b)));
  EXPECT_TRUE(heap.isWholeChunk(b, layout.read(walk, b) + 4032 - 1008))  // as if it reached the fence
      << "a first block as long as its chunk is the whole chunk";
}

TEST(TailChunkHeap, PerClassTailsCarveSeparateChunks) {
  TailChunkHeap<Chunks<4096, 4096, 100, false, /*per class*/ true>, Headers<HeaderLayout::SizeWord8>, CountingTop> heap(
      Chunks<4096, 4096, 100, false, true>{}, Headers<HeaderLayout::SizeWord8>{}, TailClasses{3});
  auto none = [](char*, std::size_t) {};
  char* a = heap.carve(heap.tailOf(0), 32, none);
  char* b = heap.carve(heap.tailOf(2), 32, none);
  char* c = heap.carve(heap.tailOf(0), 32, none);
  EXPECT_EQ(heap.chunks, 2u);
  EXPECT_EQ(c - a, 32);
  EXPECT_NE(b - a, 32);
}

// The composition SegregatedFitHeap emits, by type, over the audited top: the model check
// with boundary tags, coalescing and trim, and every byte back at the end.
TEST(TailChunkHeap, UnderASegregatedFitByTypePassesTheModelCheck) {
  {
    SegregatedFitHeap<FixedBins<64, 256, 1024, SIZE_MAX>, Fits<SizeClasses::Ranges, true, true, Coalescing::Immediate>,
                      Lists<ListStructure::DoublyLinked, ListFit::Best, ListOrder::Address>,
                      TailChunkHeap<Chunks<16384, 65536, 200, true>, Headers<HeaderLayout::BoundaryTags>, AuditedTop>>
        heap;
    modelCheck(heap, 11, true);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
  {
    SegregatedFitHeap<ExactBins<2048>, Fits<SizeClasses::Exact, false, false, Coalescing::None>,
                      Lists<ListStructure::SinglyLinked, ListFit::Exact, ListOrder::Lifo>,
                      TailChunkHeap<Chunks<65536>, Headers<HeaderLayout::SizeWord16>, AuditedTop>>
        heap;
    modelCheck(heap, 12, true);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

}  // namespace
}  // namespace heapkit::testing
