// The one trace loop (heapkit/trace/TraceLoop.h) and what the simulator builds on it:
// glibc's semantics for both ledgers (the simulator's and the replayer's), the live-object
// table against a map, the simulator's footprint accounting against a plain per-operation
// reference, and a corrupt trace reported with its offset although the simulator decodes
// without liveness checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "SimulationLoop.h"
#include "Simulate.h"
#include "Spec.h"
#include "SyntheticTraces.h"
#include "TimedReplay.h"
#include "TraceApplier.h"
#include "heapkit/trace/LiveObjects.h"
#include "heapkit/trace/OpenAddressingMap.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/trace/TraceLoop.h"
#include "heapkit/trace/Writer.h"
#include "sim_test_paths.h"

namespace heapkit::sim {
namespace {

using trace::Op;
using trace::Operation;

Operation op(Op kind, std::uint64_t id, std::uint64_t size, std::uint64_t extra = 0) {
  return {id << 8 | static_cast<std::uint64_t>(kind), size, extra};
}

// A heap with glibc's malloc-family semantics over real malloc, that refuses one size (to
// make allocations fail on purpose) and records every block it frees.
struct GlibcLikeHeap {
  static constexpr std::size_t kRefused = 1000;
  std::set<void*> live;
  std::vector<void*> freed;  // free(NULL) included
  std::vector<std::pair<void*, std::size_t>> reallocs;

  void* malloc(std::size_t size) {
    if (size == kRefused) return nullptr;
    void* p = std::malloc(size == 0 ? 1 : size);
    live.insert(p);
    return p;
  }
  void* calloc(std::size_t count, std::size_t size) { return malloc(count * size); }
  void free(void* p) {
    freed.push_back(p);
    if (p == nullptr) return;
    EXPECT_EQ(live.erase(p), 1u) << "free of a block that is not live";
    std::free(p);
  }
  void* realloc(void* p, std::size_t size) {
    reallocs.emplace_back(p, size);
    if (p == nullptr) return malloc(size);
    if (size == 0) {
      free(p);
      return nullptr;
    }
    void* q = malloc(size);
    if (q != nullptr) free(p);
    return q;
  }
  int posix_memalign(void** result, std::size_t, std::size_t size) {
    void* p = malloc(size);
    if (p == nullptr) return ENOMEM;
    *result = p;
    return 0;
  }
  std::size_t getSize(void*) { return 0; }
  ~GlibcLikeHeap() {
    for (void* p : live) std::free(p);
  }
};

// The script both ledgers run: after it, no object is live and exactly three allocations
// failed (two mallocs and a realloc). realloc(p, 0) is no failure; realloc(NULL, 0), where
// the old object's own allocation failed, is malloc(0).
const std::vector<Operation> kGlibcScript = {
    op(Op::Malloc, 0, 64),
    op(Op::Realloc, 1, 0, /*old*/ 0),  // frees object 0's block; object 1 names nothing
    op(Op::Free, 1, 0),                // free(NULL)
    op(Op::Malloc, 2, GlibcLikeHeap::kRefused),
    op(Op::Realloc, 3, 0, /*old*/ 2),  // realloc(NULL, 0): malloc(0), object 3 is a block
    op(Op::Malloc, 4, 32),
    op(Op::Realloc, 5, GlibcLikeHeap::kRefused, /*old*/ 4),  // fails: object 4 stays live
    op(Op::Free, 4, 0),
    op(Op::Free, 5, 0),  // free(NULL)
    op(Op::Free, 3, 0),
    op(Op::Malloc, 6, GlibcLikeHeap::kRefused),
    op(Op::Free, 6, 0),  // free(NULL): its allocation failed
};

void expectGlibcCalls(const GlibcLikeHeap& heap) {
  EXPECT_TRUE(heap.live.empty()) << heap.live.size() << " blocks left live";
  ASSERT_EQ(heap.reallocs.size(), 3u);
  EXPECT_NE(heap.reallocs[0].first, nullptr);
  EXPECT_EQ(heap.reallocs[0].second, 0u);
  EXPECT_EQ(heap.reallocs[1].first, nullptr) << "realloc of an object whose allocation failed is realloc(NULL, n)";
  EXPECT_EQ(heap.reallocs[1].second, 0u);
  EXPECT_NE(heap.reallocs[2].first, nullptr);
  // Blocks freed: object 0 (by realloc), NULL (object 1), object 4, NULL (object 5),
  // object 3, NULL (object 6).
  ASSERT_EQ(heap.freed.size(), 6u);
  std::vector<bool> null;
  for (void* p : heap.freed) null.push_back(p == nullptr);
  EXPECT_EQ(null, (std::vector<bool>{false, true, false, true, false, true}));
}

TEST(TraceLoop, GlibcSemanticsInTheSimulatorsLedger) {
  GlibcLikeHeap heap;
  TraceApplier<GlibcLikeHeap> applier(heap);
  for (const Operation& o : kGlibcScript) applier.apply(o);
  expectGlibcCalls(heap);
  TraceCounts counts = applier.counts();
  EXPECT_EQ(counts.failedRequests, 3u);
  EXPECT_EQ(counts.events, kGlibcScript.size());
  EXPECT_EQ(counts.reallocs, 3u);
  EXPECT_EQ(counts.frees, 5u);
  EXPECT_EQ(applier.liveBytes(), 0u);
  EXPECT_EQ(applier.untracked(), 0u) << "every free named an object the ledger knew";
}

TEST(TraceLoop, GlibcSemanticsInTheReplayersLedger) {
  GlibcLikeHeap heap;
  replay::ReplayObjects objects(7, /*touchMemory=*/true);
  trace::applyOperations(heap, objects, kGlibcScript.data(), kGlibcScript.data() + kGlibcScript.size());
  expectGlibcCalls(heap);
  EXPECT_EQ(objects.failures(), 3u);
}

// ---- the simulator on a trace with realloc(p, 0) --------------------------------------

ParsedSpec preset(const std::string& name) { return loadSpec(std::string(kPresetsDir) + "/" + name + ".json"); }

TEST(Simulator, ReallocToZeroFreesAndIsNoFailedRequest) {
  std::string path = writeTrace("realloc0.hkt", [](trace::TraceWriter& w) {
    for (int i = 0; i < 100; ++i) {
      auto a = w.malloc(0, 0, 5000);
      auto b = w.realloc(0, 0, a, 0);
      w.free(0, 0, b);
    }
  });
  for (const char* name : {"KNG", "LEA", "S10"}) {
    SimulationOptions options;
    options.reserveBytes = std::size_t{1} << 30;
    SimulationResult r = simulate(preset(name), path, options);
    EXPECT_EQ(r.operations.failedRequests, 0u) << name;
    EXPECT_EQ(r.operations.reallocs, 100u) << name;
    // Each realloc freed its block: the footprint is one 5000-byte object's, not 100.
    EXPECT_LT(r.peakFootprintBytes, std::size_t{100} * 5000) << name;
  }
  std::remove(path.c_str());
}

// The simulator decodes without liveness bits; its ledger finds a free of a dead object,
// and the error is the checking decoder's, with the offset.
TEST(Simulator, AFreeOfADeadObjectIsReportedWithItsOffset) {
  std::string path = writeTrace("double-free.hkt", [](trace::TraceWriter& w) {
    for (int i = 0; i < 2000; ++i) w.free(0, 0, w.malloc(0, 0, 24));
    auto a = w.malloc(0, 0, 24);
    w.free(0, 0, a);
    w.free(0, 0, a);
    for (int i = 0; i < 2000; ++i) w.free(0, 0, w.malloc(0, 0, 24));
  });
  trace::MappedFile file(path);
  std::string expected = trace::firstError(file.data(), file.size());
  ASSERT_EQ(expected.rfind("offset ", 0), 0u) << expected;
  ASSERT_NE(expected.find("which was already freed"), std::string::npos) << expected;
  try {
    simulate(preset("KNG"), path);
    ADD_FAILURE() << "a double free was simulated";
  } catch (const SimulationError& error) {
    EXPECT_EQ(std::string(error.what()), path + ": " + expected);
  }
  std::remove(path.c_str());
}

// ---- the live-object table -------------------------------------------------------------

TEST(LiveObjects, AgreesWithAMap) {
  struct Object {
    void* address;
    std::uint64_t size;
  };
  trace::LiveObjects<Object> table;
  std::map<std::uint64_t, std::uint64_t> model;
  std::mt19937_64 rng(7);
  std::uint64_t nextId = 0;
  std::vector<std::uint64_t> ids;
  for (int step = 0; step < 400000; ++step) {
    if (ids.empty() || rng() % 100 < 52) {
      std::uint64_t id = nextId++;
      table.insert(id, {reinterpret_cast<void*>(id * 16 + 16), id * 3});
      model[id] = id * 3;
      ids.push_back(id);
    } else {
      // Mostly the young (the window), sometimes the old (the table).
      std::size_t k = rng() % 4 == 0 ? rng() % ids.size() : ids.size() - 1 - rng() % std::min<std::size_t>(ids.size(), 64);
      std::uint64_t id = ids[k];
      auto [object, live] = table.take(id);
      ASSERT_TRUE(live) << "id " << id;
      ASSERT_EQ(object.size, model.at(id));
      ASSERT_EQ(object.address, reinterpret_cast<void*>(id * 16 + 16));
      if (rng() % 16 == 0) {
        table.insert(id, object);  // kept again (a failed realloc): an old id into the window
      } else {
        model.erase(id);
        ids[k] = ids.back();
        ids.pop_back();
      }
    }
    if (step % 4096 == 0) {
      ASSERT_FALSE(table.take(nextId + 5).live);
      ASSERT_EQ(table.size(), model.size());
    }
  }
  std::map<std::uint64_t, std::uint64_t> seen;
  table.forEach([&](std::uint64_t id, const Object& object) { seen[id] = object.size; });
  EXPECT_EQ(seen, model);
  for (auto [id, size] : model) {
    auto [object, live] = table.take(id);
    ASSERT_TRUE(live);
    EXPECT_EQ(object.size, size);
    EXPECT_FALSE(table.take(id).live) << "taken twice";
  }
  EXPECT_EQ(table.size(), 0u);
}

TEST(OpenAddressingMap, AgreesWithAMap) {
  trace::OpenAddressingMap<std::uint64_t> table;
  std::unordered_map<std::uint64_t, std::uint64_t> model;
  std::mt19937_64 rng(11);
  std::vector<std::uint64_t> keys;
  for (int step = 0; step < 300000; ++step) {
    if (keys.empty() || rng() % 100 < 55) {
      // Addresses: 16-byte aligned, clustered, as allocators hand them out.
      std::uint64_t key = 0x7f0000000000ULL + (rng() % (1 << 22)) * 16;
      if (!model.count(key)) keys.push_back(key);
      table.insert(key, step);
      model[key] = step;
    } else {
      std::size_t k = rng() % keys.size();
      std::uint64_t value = 0;
      ASSERT_TRUE(table.erase(keys[k], value));
      ASSERT_EQ(value, model[keys[k]]);
      ASSERT_FALSE(table.contains(keys[k]));
      model.erase(keys[k]);
      keys[k] = keys.back();
      keys.pop_back();
    }
    ASSERT_EQ(table.size(), model.size());
  }
  for (auto [key, value] : model) ASSERT_TRUE(table.contains(key));
  std::uint64_t ignored;
  EXPECT_FALSE(table.erase(0, ignored));
  EXPECT_FALSE(table.contains(0));
}

// ---- the simulator's footprint accounting ----------------------------------------------

// Holds memory in 4 KiB pages, one page per 3 live objects, and gives a page back only
// every other time it could: bytes held change on a few operations, and the peak rises
// inside a realloc (the new block before the old is freed).
struct PagedHeap {
  std::uint64_t liveObjects = 0, held = 0, peak = 0, next = 4096;
  bool giveBack = false;
  void adjust() {
    std::uint64_t need = (liveObjects + 2) / 3 * 4096;
    if (need > held || (need + 8192 <= held && (giveBack = !giveBack))) held = need;
    peak = std::max(peak, held);
  }
  void* malloc(std::size_t) {
    ++liveObjects;
    adjust();
    return reinterpret_cast<void*>(next += 16);
  }
  void* calloc(std::size_t n, std::size_t s) { return malloc(n * s); }
  void free(void* p) {
    if (p == nullptr) return;
    --liveObjects;
    adjust();
  }
  void* realloc(void* p, std::size_t s) {
    if (p == nullptr) return malloc(s);
    void* q = malloc(s);
    free(p);
    return q;
  }
  int posix_memalign(void** r, std::size_t, std::size_t s) {
    *r = malloc(s);
    return 0;
  }
  std::size_t getSize(void*) { return 16; }
  std::size_t bytesHeld() const { return held; }
  std::size_t peakBytesHeld() const { return peak; }
};

TEST(SimulationLoop, FootprintFiguresEqualAPerOperationReference) {
  std::mt19937_64 rng(3);
  std::string trace;
  {
    trace::TraceWriter w(&trace);
    w.begin({});
    std::vector<std::uint64_t> live;
    for (int i = 0; i < 50000; ++i) {
      int phase = (i / 5000) % 2;  // grow, then shrink
      if (!live.empty() && rng() % 100 < (phase ? 70u : 35u)) {
        std::size_t k = rng() % live.size();
        if (rng() % 8 == 0) {
          live[k] = w.realloc(0, i, live[k], 40);
        } else {
          w.free(0, i, live[k]);
          live[k] = live.back();
          live.pop_back();
        }
      } else {
        live.push_back(w.malloc(0, i, 24 + rng() % 100));
      }
    }
    w.end();
  }
  const auto* data = reinterpret_cast<const unsigned char*>(trace.data());

  // The reference: one operation at a time, figures taken after each.
  PagedHeap referenceHeap;
  TraceApplier<PagedHeap> reference(referenceHeap);
  trace::TraceDecoder events(data, trace.size());
  trace::Event e;
  unsigned __int128 heldSum = 0;
  std::size_t peak = 0;
  std::uint64_t liveAtPeak = 0, n = 0;
  std::vector<std::uint64_t> heldAfter;
  while (events.next(e)) {
    reference.apply(e);
    heldAfter.push_back(referenceHeap.bytesHeld());
    heldSum += referenceHeap.bytesHeld();
    if (referenceHeap.peakBytesHeld() > peak) {
      peak = referenceHeap.peakBytesHeld();
      liveAtPeak = reference.liveBytes();
    }
    ++n;
  }

  for (std::size_t maxSamples : {std::size_t{4}, std::size_t{512}}) {
    PagedHeap heap;
    SimulationLoop<PagedHeap> loop(heap, maxSamples);
    trace::TraceDecoder decoder(data, trace.size(), false);
    // In uneven steps, as the Python module calls the simulator.
    std::uint64_t done = 0;
    for (std::uint64_t step = 1; done < n; step = step * 3 + 1) done += loop.run(decoder, step, [] { return false; });
    ASSERT_EQ(done, n);
    FootprintFigures f = loop.figures();
    EXPECT_TRUE(f.heldByteOperations == heldSum) << "held bytes summed over operations";
    EXPECT_EQ(f.peakFootprintBytes, peak);
    EXPECT_EQ(f.liveBytesAtPeak, liveAtPeak);
    ASSERT_FALSE(f.samples.empty());
    EXPECT_EQ(f.samples.back().first, n);
    // Each point: the most held after any operation since the one before.
    std::uint64_t from = 0;
    for (auto [upTo, most] : f.samples) {
      ASSERT_GT(upTo, from);
      EXPECT_EQ(most, *std::max_element(heldAfter.begin() + from, heldAfter.begin() + upTo)) << "points up to " << upTo;
      from = upTo;
    }
    EXPECT_LE(f.samples.size(), 2 * maxSamples);
    EXPECT_EQ(loop.applier().counts().events, n);
  }
}

}  // namespace
}  // namespace heapkit::sim
