// The bin policy (combining/Bins.h): its three forms give the same bins for the same
// bounds; SegHeap and StrictSegHeap configured by value pass the randomized model check;
// and a heap with its bins by value decides and counts exactly as the same heap with them
// by type (Kingsley's and Lea's functions), address for address and count for count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "heapkit/building/AdaptHeap.h"
#include "heapkit/building/ChunkHeap.h"
#include "heapkit/building/DLList.h"
#include "heapkit/building/FreelistHeap.h"
#include "heapkit/combining/Bins.h"
#include "heapkit/combining/SegHeap.h"
#include "heapkit/combining/StrictSegHeap.h"
#include "heapkit/general/CoalescingKingsleyHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/objectrep/SizeHeap.h"
#include "heapkit/top/ArenaHeap.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

// The bounds of a by-type policy, as values.
template <class Bins>
BinTable tableOf() {
  std::vector<std::size_t> bounds;
  for (std::size_t bin = 0; bin < Bins::count(); ++bin) bounds.push_back(Bins::boundOf(bin));
  return BinTable::bounded(bounds);
}

// Sizes 0..64 KiB one by one, then powers of two and their neighbours to 2^40.
std::vector<std::size_t> probeSizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t size = 0; size <= 64 * 1024; ++size) sizes.push_back(size);
  for (std::size_t shift = 16; shift <= 40; ++shift)
    for (std::size_t size : {(std::size_t{1} << shift) - 1, std::size_t{1} << shift, (std::size_t{1} << shift) + 1})
      sizes.push_back(size);
  return sizes;
}

TEST(Bins, ATableOfBoundsGivesTheBinsOfTheFunctionsItWasMadeFrom) {
  BinTable kingsleyTable = tableOf<kingsley::Classes>();
  BinTable unbounded = tableOf<kingsley::UnboundedClasses>();
  BinTable leaTable = tableOf<lea::Classes>();
  ASSERT_EQ(kingsleyTable.count(), kingsley::kNumBins);
  ASSERT_EQ(leaTable.count(), lea::kNumBins);
  for (std::size_t size : probeSizes()) {
    // Above every bin the functions may say any number from count() up: no bin either way.
    ASSERT_EQ(kingsleyTable.binOf(size), std::min(kingsley::Classes::binOf(size), kingsley::kNumBins)) << size;
    ASSERT_EQ(unbounded.binOf(size), kingsley::UnboundedClasses::binOf(size)) << size;
    ASSERT_EQ(leaTable.binOf(size), lea::Classes::binOf(size)) << size;
  }
  // Above 4 GiB no Kingsley bin holds a size.
  EXPECT_EQ(kingsleyTable.binOf((std::size_t{1} << 32) + 1), kingsley::kNumBins);
  EXPECT_GE(kingsley::Classes::binOf((std::size_t{1} << 32) + 1), kingsley::kNumBins);
}

TEST(Bins, ExactBinsAreGranulesAndFixedBinsAreTheTable) {
  BinTable exact = BinTable::exact(1024);
  ASSERT_EQ(exact.count(), 65u);
  for (std::size_t size = 0; size <= 1024; ++size) {
    std::size_t bin = exact.binOf(size);
    ASSERT_EQ(bin, size / 16) << size;
    // Each bin holds its granule's sizes, up to its bound; the last is open.
    ASSERT_EQ(exact.boundOf(bin), bin == 64 ? SIZE_MAX : 16 * bin + 15) << size;
    if (bin > 0) {
      ASSERT_LT(exact.boundOf(bin - 1), size) << size;
    }
    // A block length (a multiple of 16) is in Lea's exact bin of that size.
    if (size % 16 == 0) {
      ASSERT_EQ(bin, lea::sizeToClass(size)) << size;
    }
  }
  EXPECT_EQ(exact.binOf(5000), 64u) << "the last bin takes every longer size";

  using Fixed = FixedBins<32, 48, 96, 512, 4096>;
  BinTable table = tableOf<Fixed>();
  for (std::size_t size : probeSizes()) ASSERT_EQ(table.binOf(size), Fixed::binOf(size)) << size;
  EXPECT_EQ(Fixed::binOf(4097), 5u);
}

TEST(Bins, BoundsThatAreNotATableBecomeOneBinForEverySize) {
  std::size_t descending[] = {64, 32};
  EXPECT_NE(BinTable::check(descending), nullptr);
  BinTable table = BinTable::bounded(descending);
  EXPECT_EQ(table.count(), 1u);
  EXPECT_EQ(table.binOf(1 << 30), 0u);
  EXPECT_NE(BinTable::check({}), nullptr);
  std::vector<std::size_t> tooMany(257);
  for (std::size_t i = 0; i < tooMany.size(); ++i) tooMany[i] = 16 * (i + 1);
  EXPECT_NE(BinTable::check(tooMany), nullptr);
}

// ---- model checks: bins by value ---------------------------------------------------------

template <class Parent>
using SLListBin = AdaptHeap<SLList, Parent>;

// Ranges with a last bin for everything longer (a design search's bins), and strict
// classes with finite bounds (above the last, the big heap serves).
BinTable searchedRanges() {
  std::size_t bounds[] = {24, 40, 48, 96, 200, 512, 1000, 4096, SIZE_MAX};
  return BinTable::bounded(bounds);
}
BinTable searchedStrictClasses() {
  std::size_t bounds[] = {16, 32, 48, 80, 128, 256, 640, 2048};
  return BinTable::bounded(bounds);
}

template <class Heap>
void modelCheck(Heap& heap) {
  for (const SizeDistribution& sizes : standardDistributions()) {
    ModelCheckOptions options;
    bool large = sizes.name == "large";
    options.operations = large ? 1000 : 12000;
    options.maxLiveObjects = large ? 40 : 1500;
    for (std::uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(sizes.name + " seed " + std::to_string(seed));
      ModelChecker<Heap> checker(heap, seed);
      checker.run(sizes, options);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(Bins, SegHeapWithBinsByValuePassesTheModelCheck) {
  TeardownAudit::leftoverBytes = 0;
  {
    SegHeap<BinTable, SLListBin, SizeHeap<AuditedTop>> heap(searchedRanges());
    modelCheck(heap);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

TEST(Bins, StrictSegHeapWithBinsByValuePassesTheModelCheck) {
  TeardownAudit::leftoverBytes = 0;
  {
    StrictSegHeap<BinTable, FreelistHeap, SizeHeap<AuditedTop>> heap(searchedStrictClasses());
    modelCheck(heap);
    // Every request is rounded to its class: a request of 33 bytes gets 48.
    void* object = heap.malloc(33);
    EXPECT_EQ(heap.getSize(object), 48u);
    heap.free(object);
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

// Tables the heaps' arrays cannot hold as they are: exact bins past the arrays' 256 (their
// sizes go to the big heap) and, for strict classes, an open last bin (no class size can
// serve it: its sizes go to the big heap too, not to a request for SIZE_MAX bytes).
TEST(Bins, TablesBeyondTheArraysOrOpenEndedStillServeEverySize) {
  TeardownAudit::leftoverBytes = 0;
  {
    SegHeap<BinTable, SLListBin, SizeHeap<AuditedTop>> exact(BinTable::exact(64 * 1024));
    modelCheck(exact);
    StrictSegHeap<BinTable, FreelistHeap, SizeHeap<AuditedTop>> strictExact(BinTable::exact(64 * 1024));
    modelCheck(strictExact);
    std::vector<std::size_t> open = {32, 64, 128, SIZE_MAX};
    StrictSegHeap<BinTable, FreelistHeap, SizeHeap<AuditedTop>> strictOpen(BinTable::bounded(open));
    modelCheck(strictOpen);
    for (std::size_t size : {200u, 5000u, 1u << 20}) {
      void* object = strictOpen.malloc(size);
      ASSERT_NE(object, nullptr) << size;
      EXPECT_GE(strictOpen.getSize(object), size);
      strictOpen.free(object);
    }
  }
  EXPECT_EQ(TeardownAudit::leftoverBytes, 0u);
}

// ---- by value against by type: the same decisions, the same counts ------------------------

using Arena = ReservedArena<CountedMemory>;
using Top = ArenaHeap<Arena>;

// Random mallocs and frees on both heaps in step: every address equal, then the counts.
template <class ByValue, class ByType>
void expectSameRun(ByValue& byValue, Arena& valueArena, ByType& byType, Arena& typeArena, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::pair<void*, void*>> live;
  for (int i = 0; i < 20000; ++i) {
    if (!live.empty() && (random() % 100 < 45 || live.size() > 800)) {
      std::size_t at = random() % live.size();
      byValue.free(live[at].first);
      byType.free(live[at].second);
      live[at] = live.back();
      live.pop_back();
    } else {
      std::size_t size = random() % 8 == 0 ? random() % 20000 : random() % 600;
      void* a = byValue.malloc(size);
      void* b = byType.malloc(size);
      ASSERT_EQ(static_cast<char*>(a) - valueArena.base(), static_cast<char*>(b) - typeArena.base())
          << "malloc " << i << " of " << size;
      live.emplace_back(a, b);
    }
  }
  for (auto [a, b] : live) {
    byValue.free(a);
    byType.free(b);
  }
  const WorkCounts& v = valueArena.workCounts();
  const WorkCounts& t = typeArena.workCounts();
  EXPECT_GT(t.steps, 0u);
  EXPECT_EQ(v.steps, t.steps);
  EXPECT_EQ(v.reads, t.reads);
  EXPECT_EQ(v.writes, t.writes);
  EXPECT_EQ(v.splits, t.splits);
  EXPECT_EQ(v.coalesces, t.coalesces);
}

TEST(Bins, StrictSegHeapByValueCountsAsKingsleyHeap) {
  Arena valueArena(std::size_t{1} << 30), typeArena(std::size_t{1} << 30);
  StrictSegHeap<BinTable, FreelistHeap, SizeHeap<ChunkHeap<kingsley::kChunkBytes, Top>>> byValue(
      tableOf<kingsley::Classes>(), valueArena, std::uint8_t{1});
  KingsleyHeap<Top> byType(typeArena, std::uint8_t{1});
  expectSameRun(byValue, valueArena, byType, typeArena, 7);
}

TEST(Bins, SegHeapByValueCountsAsCoalescingKingsleyAndLea) {
  {
    Arena valueArena(std::size_t{1} << 30), typeArena(std::size_t{1} << 30);
    CoalesceHeap<SegHeap<BinTable, kingsley::DLListBin, CoalesceableHeap<kingsley::kChunkBytes, Top>>> byValue(
        tableOf<kingsley::UnboundedClasses>(), valueArena, std::uint8_t{1});
    CoalescingKingsleyHeap<Top> byType(typeArena, std::uint8_t{1});
    expectSameRun(byValue, valueArena, byType, typeArena, 11);
  }
  {
    Arena valueArena(std::size_t{1} << 30), typeArena(std::size_t{1} << 30);
    CoalesceHeap<SegHeap<BinTable, lea::Bin, CoalesceableHeap<lea::kRegionBytes, Top>>> byValue(
        tableOf<lea::Classes>(), valueArena, std::uint8_t{1});
    LeaCoalescingHeap<CoalesceableHeap<lea::kRegionBytes, Top>> byType(typeArena, std::uint8_t{1});
    expectSameRun(byValue, valueArena, byType, typeArena, 13);
  }
}

}  // namespace
}  // namespace heapkit::testing
