// Fidelity for traces of several threads. A design of one page_segregated allocator over
// every size is libheapkit.so's form: a heap per thread (threads/ScalableHeap.h). The
// simulator gives each trace thread its heap (SelectedThreadHeaps, named per run of the
// thread's operations), and must predict, to the byte, what the same layers hold when
//  - the design runs over real memory, one thread selecting each trace thread's heap (how
//    heapkit-replay and the verifier `heapkit build` compiles replay a trace), with the
//    same work and accesses; and
//  - libheapkit.so's own registry (ThreadHeapRegistry: the heap of the thread that calls)
//    serves real threads, one per trace thread, each running its operations in its
//    recorded turn: the same heaps made in the same order, the same remote frees.
// On hand-made traces (frees by a thread that owns nothing, producers and consumers, more
// threads than the registry's direct table) and on random designs over a generated trace.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "FillAndCheck.h"
#include "RandomPageSegregated.h"
#include "Simulate.h"
#include "Spec.h"
#include "SyntheticTraces.h"
#include "TraceApplier.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/threads/ScalableHeap.h"
#include "heapkit/threads/SelectedThreadHeaps.h"
#include "heapkit/threads/ThreadHeapRegistry.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/wrapper/ANSIWrapper.h"

namespace heapkit::sim {
namespace {

constexpr std::size_t kReserve = std::size_t{16} << 30;

std::vector<trace::Event> eventsOf(const std::string& path) {
  trace::MappedFile file(path);
  trace::TraceDecoder decoder(file.data(), file.size());
  std::vector<trace::Event> events;
  trace::Event e;
  while (decoder.next(e)) events.push_back(e);
  EXPECT_FALSE(decoder.failed()) << decoder.error();
  return events;
}

struct Figures {
  std::size_t peak = 0, peakHeld = 0, end = 0, corruptions = 0;
  std::uint64_t failed = 0;
  WorkCounts counts;
  std::size_t heaps = 0;  // distinct threads the trace has
};

// The design over counting real memory, one thread selecting each event's thread.
Figures runSelected(const ParsedSpec& spec, const std::vector<trace::Event>& events) {
  Figures f;
  ANSIWrapper<DmmHeap<CountedMemory>> heap(spec.dmm, kReserve);
  EXPECT_TRUE(heap.perThreadHeaps());
  TraceApplier<decltype(heap), FillAndCheck> applier(heap, FillAndCheck{&f.corruptions});
  for (const trace::Event& e : events) {
    heap.selectThread(e.thread);
    applier.apply(e);
  }
  f.failed = applier.counts().failedRequests;
  f.end = heap.residentBytes();
  f.counts = heap.workCounts();
  f.peak = heap.peakResidentBytes();
  f.peakHeld = heap.peakBytesHeld();
  applier.freeAll();
  return f;
}

// libheapkit.so's registry over real threads: one per trace thread, each applying its
// runs of events when its turn comes, in the recorded order.
Figures runOnThreads(const ParsedSpec& spec, const std::vector<trace::Event>& events) {
  using Top = ArenaHeap<ReservedArena<RealMemory>>;
  using Heap = ANSIWrapper<ScalableHeap<Top, SizeClassTable, ScalableCoreConfig, ThreadHeapRegistry>>;
  Figures f;
  ReservedArena<RealMemory> arena(kReserve);
  {
    Heap heap(spec.dmm.allocators[0].pageSegregated.coreConfig(), arena, std::uint8_t{1});
    TraceApplier<Heap, FillAndCheck> applier(heap, FillAndCheck{&f.corruptions});
    std::uint32_t threads = 0;
    for (const trace::Event& e : events) threads = std::max(threads, e.thread + 1);
    f.heaps = threads;
    std::mutex mutex;
    std::condition_variable turn;
    std::size_t next = 0;  // the next event to apply
    auto worker = [&](std::uint32_t me) {
      std::unique_lock<std::mutex> lock(mutex);
      for (;;) {
        turn.wait(lock, [&] { return next == events.size() || events[next].thread == me; });
        if (next == events.size()) return;
        while (next < events.size() && events[next].thread == me) applier.apply(events[next++]);
        if (next == events.size()) {
          // The figures before any thread exits (an exit hands its heap on).
          f.failed = applier.counts().failedRequests;
          f.end = arena.residentBytes();
        }
        turn.notify_all();
      }
    };
    std::vector<std::thread> pool;
    for (std::uint32_t t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (std::thread& t : pool) t.join();
    f.peak = arena.peakResidentBytes();
    f.peakHeld = arena.peakBytesHeld();
    applier.freeAll();
  }
  EXPECT_EQ(arena.bytesHeld(), 0u) << "teardown returns everything";
  return f;
}

// What every real run of the design shares with its simulation, to the byte.
void expectSameFootprint(const SimulationResult& simulated, const Figures& run, const char* which) {
  SCOPED_TRACE(which);
  EXPECT_EQ(run.corruptions, 0u);
  EXPECT_EQ(simulated.peakFootprintBytes, run.peak) << "footprint high-water mark";
  EXPECT_EQ(simulated.peakBytesHeld, run.peakHeld) << "high-water mark of bytes held";
  EXPECT_EQ(simulated.endFootprintBytes, run.end) << "resident bytes at the end";
  EXPECT_EQ(simulated.operations.failedRequests, run.failed);
}

void expectFaithful(const ParsedSpec& spec, const std::string& specText, const std::string& path) {
  SCOPED_TRACE("spec " + specText + "\n trace " + path);
  SimulationOptions options;
  options.reserveBytes = kReserve;
  SimulationResult simulated = simulate(spec, path, options);
  std::vector<trace::Event> events = eventsOf(path);
  Figures selected = runSelected(spec, events);
  expectSameFootprint(simulated, selected, "one thread selecting heaps");
  // Counted memory: the work and accesses are equal too.
  EXPECT_EQ(simulated.counts.steps, selected.counts.steps) << "work";
  EXPECT_EQ(simulated.counts.reads, selected.counts.reads) << "metadata reads";
  EXPECT_EQ(simulated.counts.writes, selected.counts.writes) << "metadata writes";
  expectSameFootprint(simulated, runOnThreads(spec, events), "real threads");
}

const char* kHks = R"({"format": "heapkit-dmm/1", "allocators": [{"range": [0, null], "mechanism": "page_segregated"}]})";

// ---- hand-made traces ---------------------------------------------------------------------

// Thread 1 allocates; thread 0, which owns nothing, frees it all (remote frees); thread 1
// allocates again and collects them.
std::string consumerFreesTrace() {
  return writeTrace("threads-consumer.hkt", [](trace::TraceWriter& w) {
    std::uint64_t time = 0;
    for (int round = 0; round < 3; ++round) {
      std::vector<std::uint64_t> ids;
      for (int i = 0; i < 3000; ++i) ids.push_back(w.malloc(1, ++time, 16 + (i % 40) * 8));
      ids.push_back(w.malloc(1, ++time, 200000));  // a large block, freed by the other thread too
      for (std::uint64_t id : ids) w.free(0, ++time, id);
    }
  });
}

// Producers and consumers taking turns of a few operations each.
std::string producersConsumersTrace(std::uint32_t threads, std::uint64_t seed, std::size_t operations) {
  return writeTrace("threads-pc-" + std::to_string(threads) + "-" + std::to_string(seed) + ".hkt",
                    [=](trace::TraceWriter& w) {
                      std::mt19937_64 rng(seed);
                      std::vector<std::uint64_t> live;
                      std::uint64_t time = 0;
                      std::uint32_t thread = 0;
                      for (std::size_t step = 0; step < operations; ++step) {
                        if (rng() % 6 == 0) thread = static_cast<std::uint32_t>(rng() % threads);
                        ++time;
                        unsigned choice = static_cast<unsigned>(rng() % 100);
                        std::size_t size = rng() % 16 == 0 ? 1 + rng() % 300000 : 1 + rng() % 2048;
                        if (!live.empty() && choice < 46) {
                          std::size_t at = rng() % live.size();
                          w.free(thread, time, live[at]);
                          live[at] = live.back();
                          live.pop_back();
                        } else if (!live.empty() && choice < 52) {
                          std::size_t at = rng() % live.size();
                          live[at] = w.realloc(thread, time, live[at], size);
                        } else if (choice >= 97) {
                          live.push_back(w.aligned(thread, time, std::size_t{64} << (rng() % 7), size));
                        } else {
                          live.push_back(w.malloc(thread, time, size));
                        }
                      }
                    });
}

// More threads than SelectedThreadHeaps's direct table: each a few objects, some freed
// by the next thread.
std::string manyThreadsTrace() {
  return writeTrace("threads-many.hkt", [](trace::TraceWriter& w) {
    std::uint64_t time = 0, previous = 0;
    for (std::uint32_t t = 0; t < 300; ++t) {
      std::uint64_t a = w.malloc(t, ++time, 24 + t % 100);
      std::uint64_t b = w.malloc(t, ++time, 4000);
      if (t > 0) w.free(t, ++time, previous);
      w.free(t, ++time, b);
      previous = a;
    }
  });
}

TEST(ThreadFidelity, HandMadeTracesPredictTheRealThreadsToTheByte) {
  ParsedSpec hks = parseSpec(kHks);
  std::vector<std::string> paths = {consumerFreesTrace(), producersConsumersTrace(4, 7, 20000), manyThreadsTrace()};
  for (const std::string& path : paths) {
    expectFaithful(hks, "HKS", path);
    std::remove(path.c_str());
  }
}

// A heap per thread is what the trace's threads cost: two threads that each hold a few
// small objects hold two heaps' superblocks, where one heap shares one.
TEST(ThreadFidelity, EachThreadHasItsOwnHeap) {
  std::string two = writeTrace("threads-two.hkt", [](trace::TraceWriter& w) {
    w.malloc(0, 1, 32);
    w.malloc(1, 2, 32);
  });
  std::string one = writeTrace("threads-one.hkt", [](trace::TraceWriter& w) {
    w.malloc(0, 1, 32);
    w.malloc(0, 2, 32);
  });
  ParsedSpec hks = parseSpec(kHks);
  SimulationResult perThread = simulate(hks, two), shared = simulate(hks, one);
  EXPECT_GT(perThread.peakFootprintBytes, shared.peakFootprintBytes);
  // Not thread-aware (two allocators): one heap for every thread, as before.
  ParsedSpec split = parseSpec(
      R"({"format": "heapkit-dmm/1", "allocators": [{"range": [0, 1024], "mechanism": "page_segregated"},)"
      R"( {"range": [1024, null], "mechanism": "lea"}]})");
  EXPECT_EQ(simulate(split, two).peakFootprintBytes, simulate(split, one).peakFootprintBytes);
  expectFaithful(hks, "HKS", two);
  std::remove(two.c_str());
  std::remove(one.c_str());
}

// ---- random designs ---------------------------------------------------------------------

TEST(ThreadFidelity, RandomPageSegregatedSpecsOnAMultiThreadTracePredictTheRealThreads) {
  std::mt19937_64 rng(2031);
  std::vector<std::string> paths = {producersConsumersTrace(3, 21, 12000), producersConsumersTrace(8, 22, 12000)};
  const auto wanted = static_cast<std::size_t>(24 * testScale());
  for (std::size_t i = 0; i < wanted; ++i) {
    std::string text = "{\"format\": \"heapkit-dmm/1\", \"allocators\": [{\"range\": [0, null], "
                       "\"mechanism\": \"page_segregated\"" + randomPageSegregatedFields(rng) + "}]}";
    expectFaithful(parseSpec(text), text, paths[i % paths.size()]);
    if (HasFailure()) break;
  }
  for (const std::string& path : paths) std::remove(path.c_str());
}

}  // namespace
}  // namespace heapkit::sim
