// Fidelity: the simulator's prediction equals the real allocator's behaviour.
//
// For every preset and for hundreds of random valid specs, on synthetic traces of several
// shapes: the simulated footprint high-water mark (resident bytes: held less purged) equals,
// to the byte, the same spec's running as a real allocator (DmmHeap over real memory, every
// usable byte of every object written and checked), and so do the peak bytes held, the work
// and the access counts. Simulated KNG, LEA, ALEA and HKS equal heapkit's KingsleyHeap,
// LeaHeap, AdaptiveLeaHeap and ScalableHeap composed directly (tests/sim/thread_fidelity_test.cpp:
// the same for traces of several threads).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "FillAndCheck.h"
#include "Emit.h"
#include "Simulate.h"
#include "Spec.h"
#include "TraceApplier.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/general/AdaptiveLeaHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/general/ScalableCoreHeap.h"
#include "heapkit/threads/ScalableHeap.h"
#include "heapkit/threads/SelectedThreadHeaps.h"
#include "heapkit/top/MmapHeap.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/trace/Writer.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "RandomPageSegregated.h"
#include "SyntheticTraces.h"
#include "sim_test_paths.h"

namespace heapkit::sim {
namespace {

namespace fs = std::filesystem;

// ---- the real allocator's side ----------------------------------------------------------

struct RealRun {
  std::size_t peak = 0;  // the footprint: resident bytes
  std::size_t peakHeld = 0;
  std::size_t end = 0;
  WorkCounts counts;
  std::uint64_t failed = 0;
  std::size_t corruptions = 0;
};

template <class Heap>
void replayInto(Heap& heap, const std::string& path, RealRun& run) {
  trace::MappedFile file(path);
  trace::TraceDecoder decoder(file.data(), file.size());
  TraceApplier<Heap, FillAndCheck> applier(heap, FillAndCheck{&run.corruptions});
  trace::Event e;
  while (decoder.next(e)) applier.apply(e);
  ASSERT_FALSE(decoder.failed()) << decoder.error();
  run.failed = applier.counts().failedRequests;
  run.end = heap.residentBytes();
  if constexpr (CountingHeap<Heap>) run.counts = heap.workCounts();  // the trace's work, not the teardown's
  applier.freeAll();
}

RealRun runReal(const ParsedSpec& spec, const std::string& path) {
  RealRun run;
  ANSIWrapper<DmmHeap<CountedMemory>> heap(spec.dmm, std::size_t{16} << 30);
  replayInto(heap, path, run);
  run.peak = heap.peakResidentBytes();
  run.peakHeld = heap.peakBytesHeld();
  return run;
}

void expectFaithful(const ParsedSpec& spec, const std::string& specText, const std::string& path) {
  SCOPED_TRACE("spec " + specText + "\n trace " + path);
  SimulationOptions options;
  options.reserveBytes = std::size_t{16} << 30;
  SimulationResult simulated = simulate(spec, path, options);
  RealRun real = runReal(spec, path);
  EXPECT_EQ(real.corruptions, 0u) << "the real allocator corrupted objects";
  EXPECT_EQ(simulated.peakFootprintBytes, real.peak) << "footprint high-water mark";
  EXPECT_EQ(simulated.peakBytesHeld, real.peakHeld) << "high-water mark of bytes held";
  EXPECT_LE(simulated.peakFootprintBytes, simulated.peakBytesHeld);
  EXPECT_EQ(simulated.endFootprintBytes, real.end) << "resident bytes at the end of the trace";
  EXPECT_EQ(simulated.operations.failedRequests, real.failed);
  EXPECT_EQ(simulated.counts.steps, real.counts.steps) << "work";
  EXPECT_EQ(simulated.counts.reads, real.counts.reads) << "metadata reads";
  EXPECT_EQ(simulated.counts.writes, real.counts.writes) << "metadata writes";
  EXPECT_GT(simulated.peakFootprintBytes, 0u);
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- presets --------------------------------------------------------------------------

TEST(Fidelity, EveryPresetPredictsTheRealAllocatorToTheByte) {
  std::size_t presets = 0;
  for (const auto& entry : fs::directory_iterator(kPresetsDir)) {
    std::string text = readFile(entry.path());
    ParsedSpec spec = parseSpec(text);
    for (const std::string& path : traces().paths()) expectFaithful(spec, spec.name, path);
    ++presets;
  }
  EXPECT_GE(presets, 5u);
}

// ---- random valid specs -----------------------------------------------------------------

const char* pick(std::mt19937_64& rng, std::initializer_list<const char*> choices) {
  return choices.begin()[rng() % choices.size()];
}

std::string randomAllocator(std::mt19937_64& rng, std::size_t low, const std::string& high) {
  std::string mechanism = pick(rng, {"segregated_lists", "segregated_fit", "simple_segregated_storage",
                                     "exact_segregated_fit", "strict_segregated_fit", "kingsley", "lea", "region",
                                     "binary_buddy", "fibonacci_buddy", "weighted_buddy", "double_buddy",
                                     "page_segregated", "adaptive_lea"});
  std::string out = "{\"range\": [" + std::to_string(low) + ", " + high + "], \"mechanism\": \"" + mechanism + "\"";
  if (mechanism == "kingsley" || mechanism == "lea" || mechanism == "adaptive_lea") return out + "}";
  if (mechanism == "page_segregated") return out + randomPageSegregatedFields(rng) + "}";
  if (mechanism.ends_with("_buddy")) {
    return out + ", \"min_block_bytes\": " + std::to_string(32 + 16 * (rng() % 3)) + ", \"area_bytes\": " +
           std::to_string(4096 << (rng() % 6)) + ", \"coalesce\": \"" + pick(rng, {"none", "immediate"}) +
           "\", \"trim\": " + pick(rng, {"true", "false"}) + "}";
  }
  out += ", \"header\": \"" + std::string(pick(rng, {"size8", "size16", "boundary_tags", "boundary_tags"})) + "\"";
  std::size_t chunk = 4096 << (rng() % 5);
  out += ", \"chunk\": {\"bytes\": " + std::to_string(chunk) + ", \"max_bytes\": " + std::to_string(chunk << (rng() % 3)) +
         ", \"growth\": " + pick(rng, {"1.0", "1.5", "2.0"}) + "}";
  if (mechanism == "region") return out + "}";
  if (mechanism == "segregated_lists" || (mechanism == "strict_segregated_fit" && rng() % 2 == 0) ||
      (mechanism == "simple_segregated_storage" && rng() % 2 == 0))
    out += ", \"classes\": " + std::to_string(1 + rng() % 12);
  else if (mechanism != "exact_segregated_fit") {
    out += ", \"class_sizes\": [";
    std::size_t size = 8 + rng() % 64;
    for (std::size_t i = 0, n = 1 + rng() % 8; i < n; ++i) {
      out += (i == 0 ? "" : ", ") + std::to_string(size);
      size = size * 2 + rng() % 64;
    }
    out += "]";
  }
  if (mechanism != "simple_segregated_storage") {
    std::string structure = pick(rng, {"singly_linked", "doubly_linked", "size_tree"});
    out += ", \"list\": {\"structure\": \"" + structure + "\", \"fit\": \"" +
           (mechanism == "exact_segregated_fit" ? "exact" : pick(rng, {"first", "next", "best", "exact", "worst"})) +
           "\"";
    if (structure != "size_tree") out += ", \"order\": \"" + std::string(pick(rng, {"lifo", "fifo", "address"})) + "\"";
    out += "}";
  }
  if (rng() % 2) out += ", \"split\": " + std::string(rng() % 2 ? "true" : "false");
  if (rng() % 2) out += ", \"coalesce\": \"" + std::string(pick(rng, {"none", "immediate", "deferred"})) + "\"";
  if (rng() % 3 == 0) out += ", \"trim\": true";
  return out + "}";
}

// Placement by lifetime: 1 to 6 ascending ranges of 16-byte bounds up to 64 KiB, and a
// random allocator (its range removed) for the short-lived area.
std::string randomShortLived(std::mt19937_64& rng) {
  std::string out = ", \"short_lived\": {\"sizes\": [";
  std::size_t low = (rng() % 8) * 16;
  for (std::size_t i = 0, n = 1 + rng() % 6; i < n && low < 65536; ++i) {
    std::size_t high = std::min<std::size_t>(65536, low + 16 * (1 + rng() % (i < 3 ? 16 : 512)));
    out += i == 0 ? "[" : ", [";
    out += std::to_string(low);
    out += ", ";
    out += std::to_string(high);
    out += "]";
    low = high + 16 * (rng() % 64);
  }
  std::string allocator = randomAllocator(rng, 0, "65536");
  out += "], \"allocator\": {";
  out += allocator.substr(allocator.find("\"mechanism\""));
  return out + "}";
}

std::string randomSpec(std::mt19937_64& rng, bool shortLived = false) {
  std::size_t allocators = 1 + rng() % 3;
  std::string out = "{\"format\": \"heapkit-dmm/1\", \"allocators\": [";
  std::size_t low = 0;
  for (std::size_t i = 0; i < allocators; ++i) {
    bool last = i + 1 == allocators;
    std::size_t high = low + 16 + rng() % (i == 0 ? 1024 : 65536);
    std::string highText = last && rng() % 2 ? "null" : std::to_string(high);
    out += (i == 0 ? "" : ", ") + randomAllocator(rng, low, highText);
    low = high;
  }
  return out + "], \"fallback\": \"os\"" + (shortLived ? randomShortLived(rng) : std::string()) + "}";
}

TEST(Fidelity, HundredsOfRandomValidSpecsPredictTheRealAllocatorToTheByte) {
  std::mt19937_64 rng(2026);
  std::size_t valid = 0, tried = 0;
  const auto wanted = static_cast<std::size_t>(240 * testScale());
  while (valid < wanted && tried < 20000) {
    ++tried;
    std::string text = randomSpec(rng);
    ParsedSpec spec;
    try {
      spec = parseSpec(text);
    } catch (const SpecError&) {
      continue;  // an impossible combination: the validator's job, tested elsewhere
    }
    const std::string& path = traces().paths()[valid % traces().paths().size()];
    expectFaithful(spec, text, path);
    if (HasFailure()) return;
    ++valid;
  }
  EXPECT_EQ(valid, wanted) << "the generator found too few valid specs";
}

// Placement by lifetime: random designs with a random short-lived area (any mechanism,
// random sizes) predict the real allocator to the byte, and the area serves requests.
TEST(Fidelity, RandomSpecsWithAShortLivedAreaPredictTheRealAllocatorToTheByte) {
  std::mt19937_64 rng(2028);
  std::size_t valid = 0, tried = 0, served = 0;
  const auto wanted = static_cast<std::size_t>(120 * testScale());
  while (valid < wanted && tried < 20000) {
    ++tried;
    std::string text = randomSpec(rng, true);
    ParsedSpec spec;
    try {
      spec = parseSpec(text);
    } catch (const SpecError&) {
      continue;
    }
    ASSERT_TRUE(spec.dmm.hasShortLived) << text;
    const std::string& path = traces().paths()[valid % traces().paths().size()];
    expectFaithful(spec, text, path);
    if (HasFailure()) return;
    SimulationOptions options;
    options.reserveBytes = std::size_t{16} << 30;
    SimulationResult r = simulate(spec, path, options);
    EXPECT_EQ(r.allocators.size(), spec.dmm.count + 2) << "the short-lived area's figures follow the fallback's";
    served += r.allocators.back().requests > 0;
    ++valid;
  }
  EXPECT_EQ(valid, wanted) << "the generator found too few valid specs";
  EXPECT_GT(served, wanted / 2) << "the short-lived areas served too few requests";
}

// One page_segregated allocator over every size (the form `heapkit build` ships as the
// thread-aware heap), with random classes and parameters, on every trace.
TEST(Fidelity, RandomPageSegregatedSpecsPredictTheRealAllocatorToTheByte) {
  std::mt19937_64 rng(2027);
  const auto wanted = static_cast<std::size_t>(60 * testScale());
  std::size_t purging = 0;
  for (std::size_t i = 0; i < wanted; ++i) {
    std::string text = "{\"format\": \"heapkit-dmm/1\", \"allocators\": [{\"range\": [0, null], "
                       "\"mechanism\": \"page_segregated\"" + randomPageSegregatedFields(rng) + "}]}";
    ParsedSpec spec = parseSpec(text);
    const std::string& path = traces().paths()[i % traces().paths().size()];
    expectFaithful(spec, text, path);
    if (HasFailure()) return;
    SimulationOptions options;
    options.reserveBytes = std::size_t{16} << 30;
    SimulationResult r = simulate(spec, path, options);
    purging += r.peakFootprintBytes < r.peakBytesHeld;
  }
  EXPECT_GT(purging, 0u) << "no random design kept fewer bytes resident than it held";
}

// ---- KNG and LEA are heapkit's own heaps ----------------------------------------------------

template <class Heap, class... ConfigArgs>
std::size_t directPeak(const std::string& path, const ConfigArgs&... config) {
  ReservedArena<CountedMemory> arena(std::size_t{16} << 30);
  RealRun run;
  {
    ANSIWrapper<Heap> heap(config..., arena, std::uint8_t{1});
    replayInto(heap, path, run);
  }
  EXPECT_EQ(run.corruptions, 0u);
  EXPECT_EQ(arena.bytesHeld(), 0u) << "teardown returns everything";
  return arena.peakResidentBytes();
}

TEST(Fidelity, SimulatedKingsleyAndLeaEqualKingsleyHeapAndLeaHeap) {
  using Top = ArenaHeap<ReservedArena<CountedMemory>>;
  ParsedSpec kng = parseSpec(readFile(fs::path(kPresetsDir) / "KNG.json"));
  ParsedSpec lea = parseSpec(readFile(fs::path(kPresetsDir) / "LEA.json"));
  for (const std::string& path : traces().paths()) {
    SCOPED_TRACE(path);
    EXPECT_EQ(simulate(kng, path).peakFootprintBytes, directPeak<KingsleyHeap<Top>>(path));
    EXPECT_EQ(simulate(lea, path).peakFootprintBytes, directPeak<LeaHeap<Top>>(path));
  }
}

TEST(Fidelity, SimulatedAleaAndHksEqualAdaptiveLeaHeapAndScalableHeap) {
  using Top = ArenaHeap<ReservedArena<CountedMemory>>;
  ParsedSpec alea = parseSpec(readFile(fs::path(kPresetsDir) / "ALEA.json"));
  ParsedSpec hks = parseSpec(readFile(fs::path(kPresetsDir) / "HKS.json"));
  for (const std::string& path : traces().paths()) {
    SCOPED_TRACE(path);
    EXPECT_EQ(simulate(alea, path).peakFootprintBytes, directPeak<AdaptiveLeaHeap<Top>>(path));
    // libheapkit.so's heap (a heap per thread; these traces have one) with its 36 classes
    // by type, as it ships them.
    EXPECT_EQ(simulate(hks, path).peakFootprintBytes,
              (directPeak<ScalableHeap<Top, ScalableSizeClasses, ScalableCoreConfig, SelectedThreadHeaps>>(
                  path, ScalableCoreConfig{})));
  }
}

// One class table (issue 21): HKS, libheapkit.so's single-thread path, has libheapkit.so's
// classes, 36 to 16 KiB: those of ScalableHeap's default Classes, which libheapkit.so is
// built with (src/preload/CMakeLists.txt; tests/python/test_search.py checks its HEAP), and
// `heapkit emit` names them as that type. A library or preset given other classes fails here.
static_assert(std::is_same_v<ScalableHeap<MmapHeap>, ScalableHeap<MmapHeap, ScalableSizeClasses>>);
TEST(Fidelity, HksHasLibheapkitsClasses) {
  ParsedSpec hks = parseSpec(readFile(fs::path(kPresetsDir) / "HKS.json"));
  ASSERT_EQ(hks.dmm.count, 1u);
  ASSERT_EQ(hks.dmm.allocators[0].mechanism, Mechanism::PageSegregated);
  const PageSegregatedSpec& classes = hks.dmm.allocators[0].pageSegregated;
  ASSERT_EQ(classes.classCount, ScalableSizeClasses::count());
  for (std::size_t i = 0; i < classes.classCount; ++i) EXPECT_EQ(classes.classBytes[i], ScalableSizeClasses::bytesOf(i)) << i;
  EXPECT_EQ(classes.classes().back(), 16u * 1024);
  std::string header = emitHeader(hks, "hks", "HKS.json");
  EXPECT_NE(header.find("using Allocator0Classes = heapkit::ScalableSizeClasses;"), std::string::npos) << header;
}

// ---- bad input --------------------------------------------------------------------------------

TEST(Fidelity, ATraceTooBigForTheReservedRangeIsOneClearError) {
  ParsedSpec kng = parseSpec(readFile(fs::path(kPresetsDir) / "KNG.json"));
  SimulationOptions options;
  options.reserveBytes = std::size_t{1} << 20;  // 1 MiB: the "large" trace needs far more
  try {
    simulate(kng, traces().paths()[3], options);
    FAIL() << "expected a SimulationError";
  } catch (const SimulationError& error) {
    EXPECT_NE(std::string(error.what()).find("does not fit the 1 MiB reserved"), std::string::npos) << error.what();
  }
}

TEST(Fidelity, ACorruptOrTruncatedTraceIsOneClearError) {
  ParsedSpec kng = parseSpec(readFile(fs::path(kPresetsDir) / "KNG.json"));
  std::string original = readFile(traces().paths()[0]);
  std::string truncatedPath = traces().paths()[0] + ".truncated";
  {
    std::ofstream out(truncatedPath, std::ios::binary);
    out.write(original.data(), static_cast<std::streamsize>(original.size() / 2));
  }
  EXPECT_THROW(simulate(kng, truncatedPath), SimulationError);
  {
    std::ofstream out(truncatedPath, std::ios::binary);
    out << "not a trace at all";
  }
  EXPECT_THROW(simulate(kng, truncatedPath), SimulationError);
  EXPECT_THROW(simulate(kng, truncatedPath + ".missing"), SimulationError);
  std::remove(truncatedPath.c_str());
}

}  // namespace
}  // namespace heapkit::sim
