// The memory model (heapkit/core/CacheModel.h) on hand-made address sequences, whose hits,
// misses and faults are derived by hand in the comments; and its counts in the simulator
// on tiny traces (pages the program touches, pages given back and touched again, bytes a
// moving realloc copies).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <algorithm>
#include <bit>
#include <list>
#include <map>
#include <random>
#include <vector>

#include "Simulate.h"
#include "SyntheticTraces.h"
#include "Spec.h"
#include "heapkit/core/CacheModel.h"
#include "heapkit/trace/Writer.h"

namespace heapkit {
namespace {

TEST(SetAssociativeCache, LeastRecentlyUsedWithinEachSet) {
  SetAssociativeCache<2> cache(4);  // 2 sets of 2 ways; a key's set is its lowest bit
  EXPECT_FALSE(cache.access(0));    // set 0: [0]
  EXPECT_FALSE(cache.access(2));    // set 0: [2 0]
  EXPECT_TRUE(cache.access(0));     // set 0: [0 2]
  EXPECT_FALSE(cache.access(4));    // evicts 2, the least recent: [4 0]
  EXPECT_FALSE(cache.access(2));    // evicts 0: [2 4]
  EXPECT_TRUE(cache.access(4));     // [4 2]
  EXPECT_FALSE(cache.access(0));    // evicts 2: [0 4]
  EXPECT_FALSE(cache.access(1));    // set 1 is apart: [1]
  EXPECT_TRUE(cache.access(1));
  EXPECT_TRUE(cache.access(4));     // set 0 untouched by set 1's traffic
}

TEST(SetAssociativeCache, RoundsItsEntriesUpToAPowerOfTwo) {
  SetAssociativeCache<4> cache(5);  // 8 entries: 2 sets of 4
  for (std::uint64_t key : {0, 2, 4, 6}) EXPECT_FALSE(cache.access(key));
  for (std::uint64_t key : {0, 2, 4, 6}) EXPECT_TRUE(cache.access(key));  // four ways held all four
}

// The reference: a set as a list of keys, most recent first, at most `ways` long. Moves
// `key` to the front (evicting the last on a miss); says whether it was there.
bool accessList(std::list<std::uint64_t>& list, std::uint64_t key, unsigned ways) {
  auto found = std::find(list.begin(), list.end(), key);
  bool hit = found != list.end();
  if (hit) list.erase(found);
  else if (list.size() == ways) list.pop_back();
  list.push_front(key);
  return hit;
}

// Each set as a list, most recent first: SetAssociativeCache must hit and miss as it does,
// whichever way a key was in, on random keys that revisit a few sets often.
template <unsigned Ways>
void checkSetsAgainstLists(std::size_t entries, unsigned seed) {
  SetAssociativeCache<Ways> cache(entries);
  std::size_t sets = std::bit_ceil(std::max<std::size_t>(entries, Ways)) / Ways;
  std::vector<std::list<std::uint64_t>> lists(sets);
  std::mt19937_64 random(seed);
  std::uint64_t hits = 0;
  for (int step = 0; step < 100000; ++step) {
    // Keys from a range a few times the cache's size, so that every way position hits.
    std::uint64_t key = random() % (3 * sets * Ways);
    bool hit = accessList(lists[key % sets], key, Ways);
    ASSERT_EQ(cache.access(key), hit) << "step " << step << ", key " << key;
    hits += hit;
  }
  EXPECT_GT(hits, 10000u);
}

// The order itself, after every access: each set holds the keys of its list in the list's
// order (most recent first), then empty ways. A change that kept the hits right for a while
// but ordered a set differently fails here at the access that did it, not later.
template <unsigned Ways>
void checkOrderAgainstLists(std::size_t entries, unsigned seed) {
  SetAssociativeCache<Ways> cache(entries);
  std::size_t sets = std::bit_ceil(std::max<std::size_t>(entries, Ways)) / Ways;
  std::vector<std::list<std::uint64_t>> lists(sets);
  std::mt19937_64 random(seed);
  std::uint64_t recent = 0;
  for (int step = 0; step < 50000; ++step) {
    // Half the keys revisit one of the last few (hits at every way, the first included),
    // the rest from a range a few times the cache's size (misses, evictions).
    std::uint64_t key = random() % 2 == 0 ? recent + random() % 4 * sets : random() % (3 * sets * Ways);
    recent = key;
    std::list<std::uint64_t>& list = lists[key % sets];
    accessList(list, key, Ways);
    cache.access(key);
    const std::uint64_t* ways = cache.setOf(key);
    std::vector<std::uint64_t> expected(list.begin(), list.end());
    expected.resize(Ways, ~std::uint64_t{0});
    ASSERT_EQ(std::vector<std::uint64_t>(ways, ways + Ways), expected) << "step " << step << ", key " << key;
  }
}

TEST(SetAssociativeCache, KeepsEachSetInTheOrderOfItsList) {
  for (unsigned seed = 1; seed <= 3; ++seed) {
    checkOrderAgainstLists<2>(8, seed);
    checkOrderAgainstLists<8>(64, seed);
    checkOrderAgainstLists<8>(512, seed);
    checkOrderAgainstLists<16>(16, seed);
    checkOrderAgainstLists<16>(256, seed);
  }
}

TEST(SetAssociativeCache, HitsAndMissesAsListsMostRecentFirst) {
  for (unsigned seed = 1; seed <= 3; ++seed) {
    checkSetsAgainstLists<2>(8, seed);
    checkSetsAgainstLists<8>(64, seed);
    checkSetsAgainstLists<16>(16, seed);
    checkSetsAgainstLists<16>(256, seed);
  }
}

class CacheModelTest : public ::testing::Test {
 protected:
  // Tracked "arena" of 64 pages, aligned to a page; nothing is read or written there: the
  // model only follows addresses.
  alignas(4096) static inline char arena[64 * 4096];
  // One set per level: L1 holds 8 lines, L2 16 lines, L3 32 lines, the TLB 16 pages.
  CacheGeometry tiny{.l1Bytes = 8 * 64, .l2Bytes = 16 * 64, .l3Bytes = 32 * 64, .tlbEntries = 16};
};

TEST_F(CacheModelTest, CountsMissesPerLevelAndTlbMisses) {
  CacheModel model(arena, 0, tiny);  // no page tracked: no faults, every access goes to the caches
  model.access(arena);  // line 0, page 0: cold everywhere
  EXPECT_EQ(model.counts().l1Misses, 1u);
  EXPECT_EQ(model.counts().l2Misses, 1u);
  EXPECT_EQ(model.counts().l3Misses, 1u);
  EXPECT_EQ(model.counts().tlbMisses, 1u);
  EXPECT_EQ(model.counts().pagesTouched, 0u);
  model.access(arena + 8);  // same line: hits everywhere
  EXPECT_EQ(model.counts().l1Misses, 1u);
  // Lines 1..8 of page 0: 8 cold misses; L1 (8 lines) now holds 1..8 and has evicted 0.
  for (int line = 1; line <= 8; ++line) model.access(arena + line * 64);
  EXPECT_EQ(model.counts().l1Misses, 9u);
  EXPECT_EQ(model.counts().l2Misses, 9u);
  model.access(arena);  // line 0: out of L1, still in L2 (16 lines)
  EXPECT_EQ(model.counts().l1Misses, 10u);
  EXPECT_EQ(model.counts().l2Misses, 9u);
  EXPECT_EQ(model.counts().tlbMisses, 1u);  // all in page 0
  // 16 more lines, one in each of pages 1..16: 16 TLB misses, 16 misses in every level;
  // the TLB (16 pages) has now evicted page 0, L2 (16 lines) line 0.
  for (int page = 1; page <= 16; ++page) model.access(arena + page * 4096);
  EXPECT_EQ(model.counts().tlbMisses, 17u);
  EXPECT_EQ(model.counts().l2Misses, 25u);
  EXPECT_EQ(model.counts().l3Misses, 25u);  // 25 distinct lines so far
  // L3 is 2 sets of 16 (a line's set is its lowest bit). Set 0 has seen the even lines
  // 2, 4, 6, 8, 0 (again) and the 16 pages' first lines (all even): line 0 was evicted.
  model.access(arena);  // page 0 again: a TLB miss, an L2 miss and an L3 miss, but no fault
  EXPECT_EQ(model.counts().tlbMisses, 18u);
  EXPECT_EQ(model.counts().l2Misses, 26u);
  EXPECT_EQ(model.counts().l3Misses, 26u);
  model.access(arena + 64);  // line 1 (odd: set 1, which saw 1, 3, 5, 7 only): out of L2, in L3
  EXPECT_EQ(model.counts().l2Misses, 27u);
  EXPECT_EQ(model.counts().l3Misses, 26u);
  EXPECT_EQ(model.counts().pagesTouched, 0u);
  EXPECT_EQ(model.counts().accesses, 1u + 1 + 8 + 1 + 16 + 1 + 1);
}

TEST_F(CacheModelTest, AFaultIsNoCacheMiss) {
  CacheModel model(arena, sizeof arena, tiny);
  model.access(arena);  // page 0's first touch: a fault and a TLB miss; the kernel wrote the line
  EXPECT_EQ(model.counts().pagesTouched, 1u);
  EXPECT_EQ(model.counts().tlbMisses, 1u);
  EXPECT_EQ(model.counts().l1Misses, 0u);
  model.access(arena + 8);  // the same line: a hit
  model.access(arena + 64);  // another line of the resident page: cold
  EXPECT_EQ(model.counts().l1Misses, 1u);
  EXPECT_EQ(model.counts().l2Misses, 1u);
  EXPECT_EQ(model.counts().pagesTouched, 1u);
}

TEST_F(CacheModelTest, PagesGivenBackFaultAgain) {
  CacheModel model(arena, sizeof arena, tiny);
  for (int page = 0; page < 70; ++page) model.access(arena + (page % 64) * 4096);  // 64 pages, 6 again
  EXPECT_EQ(model.counts().pagesTouched, 64u);
  // Pages 3..66 would be past the range: only 3..63 are released (61 pages), through
  // a whole word of the bitmap (pages 0..63) partly and bit by bit.
  model.pagesReleased(arena + 3 * 4096, 64 * 4096);
  EXPECT_EQ(model.counts().releases, 1u);
  for (int page = 0; page < 64; ++page) model.access(arena + page * 4096);
  EXPECT_EQ(model.counts().pagesTouched, 64u + 61u);
  // Releasing part of a page's bytes releases the whole page, as madvise does.
  model.pagesReleased(arena + 10 * 4096 + 100, 10);
  model.access(arena + 10 * 4096);
  EXPECT_EQ(model.counts().pagesTouched, 64u + 61u + 1u);
}

TEST_F(CacheModelTest, AddressesOutsideTheRangeNeverFault) {
  CacheModel model(arena, 4 * 4096, tiny);
  model.access(arena + 5 * 4096);  // past the tracked range: resident, but cold in the caches
  EXPECT_EQ(model.counts().pagesTouched, 0u);
  EXPECT_EQ(model.counts().l1Misses, 1u);
  EXPECT_EQ(model.counts().l3Misses, 1u);
  EXPECT_EQ(model.counts().tlbMisses, 1u);
}

TEST(CacheModelPlacement, CountsDoNotDependOnWhereTheProcessPlacedOtherMemory) {
  // Two regions outside the arena (a heap object's fields, a table), their lines 64 KiB
  // apart, so that in the default 1 MiB 16-way L2 each region's lines share one set.
  // In the first process the regions lie 16 MiB apart: with the raw addresses their 18
  // lines would share that set and miss on every round; in the second they lie one page
  // further apart, in other sets. The model numbers such pages by first sight, so both
  // count the same, as a search needs (the same design, the same predicted time).
  static char arena[4096];
  auto run = [](std::uintptr_t second) {
    CacheModel model(arena, sizeof arena);
    const std::uintptr_t first = std::uintptr_t{1} << 44;
    for (int round = 0; round < 4; ++round)
      for (std::uintptr_t i = 0; i < 9; ++i) {
        model.access(reinterpret_cast<const void*>(first + i * 65536));
        model.access(reinterpret_cast<const void*>(first + second + i * 65536));
      }
    return model.counts();
  };
  CacheModelCounts near = run(16 << 20), far = run((16 << 20) + 4096);
  EXPECT_EQ(near.l1Misses, far.l1Misses);
  EXPECT_EQ(near.l2Misses, far.l2Misses);
  EXPECT_EQ(near.l3Misses, far.l3Misses);
  EXPECT_EQ(near.tlbMisses, far.tlbMisses);
  EXPECT_EQ(near.l2Misses, 18u);  // the first round's cold misses only
}

TEST_F(CacheModelTest, TouchingAnObjectWritesOneBytePerPage) {
  CacheModel model(arena, sizeof arena, tiny);
  // 3 pages' bytes from 100 bytes into page 2: writes at +0, +4096, +8192 (pages 2, 3, 4),
  // as heapkit-replay's touch; the object's tail in page 5 is not written.
  model.touchObject(arena + 2 * 4096 + 100, 3 * 4096);
  EXPECT_EQ(model.counts().accesses, 3u);
  EXPECT_EQ(model.counts().pagesTouched, 3u);
  model.touchObject(arena + 2 * 4096 + 100, 1);  // one byte: one write, no new page
  EXPECT_EQ(model.counts().pagesTouched, 3u);
  EXPECT_EQ(model.counts().accesses, 4u);
}

// The model as the header's comment describes it, written plainly: every access goes
// through the TLB and the fault check, and each level keeps its sets as lists, most recent
// first. CacheModel must count the same whatever shortcuts it takes.
class PlainMemoryModel {
 public:
  PlainMemoryModel(std::uintptr_t arenaBase, std::size_t arenaPages, const CacheGeometry& geometry)
      : arenaFirstPage_(arenaBase / 4096), arenaPages_(arenaPages), touched_(arenaPages),
        l1_(geometry.l1Bytes / 64, 8), l2_(geometry.l2Bytes / 64, 16), l3_(geometry.l3Bytes / 64, 16),
        tlb_(geometry.tlbEntries, 16) {}

  void access(std::uintptr_t at) {
    ++counts.accesses;
    std::uint64_t page = at / 4096, virtualPage;
    bool inArena = page - arenaFirstPage_ < arenaPages_;
    if (inArena) virtualPage = (std::uint64_t{1} << 40) + (page - arenaFirstPage_);
    else virtualPage = otherPages_.try_emplace(page, otherPages_.size()).first->second;
    if (!tlb_.access(virtualPage)) ++counts.tlbMisses;
    std::uint64_t line = virtualPage * 64 + at % 4096 / 64;
    if (inArena && !touched_[page - arenaFirstPage_]) {
      touched_[page - arenaFirstPage_] = true;
      ++counts.pagesTouched;
      l1_.access(line), l2_.access(line), l3_.access(line);
      return;
    }
    if (!l1_.access(line)) {
      ++counts.l1Misses;
      if (!l2_.access(line)) {
        ++counts.l2Misses;
        if (!l3_.access(line)) ++counts.l3Misses;
      }
    }
  }
  void release(std::uintptr_t start, std::size_t bytes) {
    ++counts.releases;
    for (std::uint64_t page = start / 4096; page < (start + bytes + 4095) / 4096; ++page)
      if (page - arenaFirstPage_ < arenaPages_) touched_[page - arenaFirstPage_] = false;
  }

  CacheModelCounts counts;

 private:
  struct Level {
    Level(std::size_t entries, std::size_t ways) : ways(ways), sets(std::max<std::size_t>(entries / ways, 1)) {}
    bool access(std::uint64_t key) {
      std::list<std::uint64_t>& set = sets[key % sets.size()];
      auto found = std::find(set.begin(), set.end(), key);
      bool hit = found != set.end();
      if (hit) set.erase(found);
      else if (set.size() == ways) set.pop_back();
      set.push_front(key);
      return hit;
    }
    std::size_t ways;
    std::vector<std::list<std::uint64_t>> sets;
  };
  std::uint64_t arenaFirstPage_;
  std::size_t arenaPages_;
  std::vector<bool> touched_;
  std::map<std::uint64_t, std::uint64_t> otherPages_;
  Level l1_, l2_, l3_, tlb_;
};

// Random walks that return often to a few pages (a heap's own fields, list heads), as the
// simulator's accesses do, over arena pages and pages outside it, with releases between:
// the model's counts equal the plain model's, with the default geometry and a small one
// whose TLB has several sets.
TEST_F(CacheModelTest, CountsAsThePlainModelOnRandomWalks) {
  static char outside[16 * 4096];
  CacheGeometry smallSets{.l1Bytes = 16 * 64, .l2Bytes = 64 * 64, .l3Bytes = 256 * 64, .tlbEntries = 64};
  for (const CacheGeometry& geometry : {CacheGeometry{}, smallSets, tiny}) {
    for (unsigned seed = 1; seed <= 4; ++seed) {
      std::mt19937_64 random(seed);
      CacheModel model(arena, sizeof arena, geometry);
      PlainMemoryModel plain(reinterpret_cast<std::uintptr_t>(arena), sizeof arena / 4096, geometry);
      std::uintptr_t favourites[3] = {reinterpret_cast<std::uintptr_t>(outside),
                                      reinterpret_cast<std::uintptr_t>(arena) + 4096 * 7,
                                      reinterpret_cast<std::uintptr_t>(outside) + 4096 * 9};
      std::uintptr_t previous = favourites[0];
      for (int step = 0; step < 200000; ++step) {
        std::uintptr_t at;
        unsigned pick = random() % 20;
        if (pick < 8) at = favourites[pick % 3] + random() % 4096;
        else if (pick < 14) at = reinterpret_cast<std::uintptr_t>(arena) + random() % sizeof arena;
        else if (pick < 16) at = reinterpret_cast<std::uintptr_t>(outside) + random() % sizeof outside;
        else if (pick < 18) at = (previous & ~std::uintptr_t{63}) + random() % 64;  // the same line again (a header's words)
        else at = (previous & ~std::uintptr_t{4095}) + random() % 4096;               // the same page again
        previous = at;
        if (random() % 5000 == 0) {
          std::uintptr_t start = reinterpret_cast<std::uintptr_t>(arena) + random() % sizeof arena;
          std::size_t bytes = random() % (8 * 4096);
          model.pagesReleased(reinterpret_cast<const void*>(start), bytes);
          plain.release(start, bytes);
        }
        model.access(reinterpret_cast<const void*>(at));
        plain.access(at);
      }
      const CacheModelCounts &fast = model.counts(), &slow = plain.counts;
      SCOPED_TRACE(::testing::Message() << "seed " << seed << ", TLB entries " << geometry.tlbEntries);
      EXPECT_EQ(fast.accesses, slow.accesses);
      EXPECT_EQ(fast.l1Misses, slow.l1Misses);
      EXPECT_EQ(fast.l2Misses, slow.l2Misses);
      EXPECT_EQ(fast.l3Misses, slow.l3Misses);
      EXPECT_EQ(fast.tlbMisses, slow.tlbMisses);
      EXPECT_EQ(fast.pagesTouched, slow.pagesTouched);
      EXPECT_EQ(fast.releases, slow.releases);
      EXPECT_GT(slow.tlbMisses, 0u);
      EXPECT_GT(slow.pagesTouched, 64u);  // released pages faulted again
    }
  }
}

}  // namespace

namespace sim {
namespace {

// Small objects in Kingsley, the rest from the OS fallback: one extent each, whose header
// the top heap stores through the counting (an addressed access), so the extent's first
// page is touched with or without the program's touches, and its other pages by the
// program alone.
ParsedSpec smallThenOs() {
  return parseSpec(R"({"format": "heapkit-dmm/1", "name": "small-then-os",
                       "allocators": [{"range": [0, 1024], "mechanism": "kingsley"}]})");
}

SimulationResult run(const std::string& path, bool touch, bool model = true) {
  SimulationOptions options;
  options.reserveBytes = std::size_t{1} << 30;
  options.touchObjects = touch;
  options.cacheModel = model;
  return simulate(smallThenOs(), path, options);
}

TEST(SimulatorMemoryModel, CountsThePagesTheProgramTouchesAndTouchesAgainAfterRelease) {
  // 1 MiB from the OS fallback, freed (its extent released: MADV_DONTNEED), then again
  // (the same granules, first fit): the program touches 256 pages each time, of which
  // 255 fault because of it (the header's page faults either way).
  std::string path = writeTrace("release.hkt", [](trace::TraceWriter& w) {
    auto a = w.malloc(0, 0, 1 << 20);
    w.free(0, 0, a);
    auto b = w.malloc(0, 0, 1 << 20);
    w.free(0, 0, b);
  });
  SimulationResult touched = run(path, true), untouched = run(path, false);
  ASSERT_TRUE(touched.cacheModelled);
  EXPECT_EQ(touched.memory.pagesTouched - untouched.memory.pagesTouched, 2u * 255);
  EXPECT_EQ(touched.memory.accesses - untouched.memory.accesses, 2u * 256);
  EXPECT_EQ(touched.memory.releases, 2u);  // each free gave its extent back
  SimulationResult off = run(path, true, false);
  EXPECT_FALSE(off.cacheModelled);
  EXPECT_EQ(off.memory.accesses, 0u);
  EXPECT_EQ(off.counts.steps, touched.counts.steps);  // the model changes no count of work
  EXPECT_EQ(off.counts.reads + off.counts.writes, touched.counts.reads + touched.counts.writes);
  std::remove(path.c_str());
}

TEST(SimulatorMemoryModel, FollowsMetadataAccessesAndMovingReallocs) {
  std::string path = writeTrace("realloc.hkt", [](trace::TraceWriter& w) {
    auto a = w.malloc(0, 0, 100);
    auto b = w.realloc(0, 0, a, 80);      // within the usable bytes, at least half: in place
    auto c = w.realloc(0, 0, b, 20000);   // moves to the fallback: 100 bytes copied (usable 128,
    w.free(0, 0, c);                      //   the new size larger), min(20000, 128) = 128
    auto d = w.calloc(0, 0, 3 * 4096);    // the fallback; calloc zeroes every page
    w.free(0, 0, d);
  });
  SimulationResult r = run(path, false);
  EXPECT_EQ(r.program.copiedBytes, 128u);
  // Without the replay's touches the program writes the calloc's 3 pages (its memset) and
  // the realloc's copy (1 page); the rest are the metadata words whose address the counting
  // reports (at most all of them).
  EXPECT_GE(r.memory.accesses, 3u + 1u);
  EXPECT_LE(r.memory.accesses, 3u + 1u + r.counts.reads + r.counts.writes);
  EXPECT_GE(r.memory.pagesTouched, 3u + 1u);
  // Deterministic: the same figures twice.
  SimulationResult again = run(path, false);
  EXPECT_EQ(again.memory.l1Misses, r.memory.l1Misses);
  EXPECT_EQ(again.memory.tlbMisses, r.memory.tlbMisses);
  EXPECT_EQ(again.memory.pagesTouched, r.memory.pagesTouched);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sim
}  // namespace heapkit
