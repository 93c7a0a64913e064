// The emitted (compile-time) form of every preset and of the designs in tests/sim/designs:
// it compiled under -Wall -Wextra -Werror to get here; it passes the model checker; and
// on every synthetic trace it hands out the same offsets, holds the same bytes and counts
// the same work as the run-time DmmHeap the simulator uses on the same spec.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "Spec.h"
#include "SyntheticTraces.h"
#include "TraceApplier.h"
#include "emitted_designs.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/general/AdaptiveLeaHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/top/MmapHeap.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "support/ModelCheck.h"

namespace heapkit::sim {
namespace {

// Where each object landed, as an offset from its arena's base.
template <class Heap>
struct RecordOffsets {
  const Heap* heap;
  std::vector<std::uint64_t>* offsets;
  void written(void* object, std::uint64_t, std::uint64_t) {
    offsets->push_back(static_cast<std::uint64_t>(static_cast<char*>(object) - heap->arena().base()));
  }
  void freeing(void*, std::uint64_t, std::uint64_t) {}
};

template <class Heap>
std::vector<std::uint64_t> replayOffsets(Heap& heap, const std::string& path) {
  std::vector<std::uint64_t> offsets;
  trace::MappedFile file(path);
  trace::TraceDecoder decoder(file.data(), file.size());
  TraceApplier<Heap, RecordOffsets<Heap>> applier(heap, {&heap, &offsets});
  trace::Event e;
  while (decoder.next(e)) applier.apply(e);
  EXPECT_FALSE(decoder.failed()) << decoder.error();
  return offsets;
}

template <std::size_t I>
void checkDesign() {
  using Emitted = std::tuple_element_t<I, emitted::Designs>;
  SCOPED_TRACE(emitted::kSpecPaths[I]);
  ParsedSpec spec = loadSpec(emitted::kSpecPaths[I]);
  for (const std::string& path : traces().paths()) {
    SCOPED_TRACE(path);
    ANSIWrapper<Emitted> compiled(std::size_t{16} << 30);
    ANSIWrapper<DmmHeap<CountedMemory>> configured(spec.dmm, std::size_t{16} << 30);
    EXPECT_EQ(replayOffsets(compiled, path), replayOffsets(configured, path)) << "addresses differ";
    EXPECT_EQ(compiled.peakBytesHeld(), configured.peakBytesHeld());
    EXPECT_EQ(compiled.peakResidentBytes(), configured.peakResidentBytes());
    EXPECT_EQ(compiled.bytesHeld(), configured.bytesHeld());
    EXPECT_EQ(compiled.residentBytes(), configured.residentBytes());
    EXPECT_EQ(compiled.workCounts().steps, configured.workCounts().steps);
    EXPECT_EQ(compiled.workCounts().reads, configured.workCounts().reads);
    EXPECT_EQ(compiled.workCounts().writes, configured.workCounts().writes);
  }
  for (const testing::SizeDistribution& sizes : testing::standardDistributions()) {
    SCOPED_TRACE(sizes.name);
    Emitted heap(std::size_t{16} << 30);  // bare: the checker's realloc(p, 0) is not C's
    testing::ModelChecker<Emitted> checker(heap, 17 + I);
    testing::ModelCheckOptions options;
    options.operations = static_cast<std::size_t>(4000 * testScale());
    options.maxLiveObjects = 400;
    checker.run(sizes, options);
  }
}

template <std::size_t... I>
void checkAll(std::index_sequence<I...>) {
  (checkDesign<I>(), ...);
}

TEST(Emitted, EveryDesignMatchesTheSimulatorsHeapAndPassesTheModelCheck) {
  constexpr std::size_t count = std::tuple_size_v<emitted::Designs>;
  static_assert(count >= 13, "the presets and the test designs");
  checkAll(std::make_index_sequence<count>{});
}

// A design of one page_segregated allocator over every size is also emitted as
// ThreadAware<Top>, libheapkit.so's thread-aware ScalableHeap with the design's classes and
// values (what `heapkit build` ships): it passes the model check, and its classes are the
// spec's (getSize of a small object is its class's size).
template <std::size_t I>
void checkThreadAware() {
  using Heap = std::tuple_element_t<I, emitted::ThreadAwareDesigns>;
  for (const testing::SizeDistribution& sizes : testing::standardDistributions()) {
    SCOPED_TRACE(sizes.name);
    Heap heap;
    testing::ModelChecker<Heap> checker(heap, 31 + I);
    testing::ModelCheckOptions options;
    options.operations = static_cast<std::size_t>(4000 * testScale());
    options.maxLiveObjects = 400;
    checker.run(sizes, options);
  }
}

template <std::size_t... I>
void checkAllThreadAware(std::index_sequence<I...>) {
  (checkThreadAware<I>(), ...);
}

TEST(Emitted, ThreadAwareDesignsPassTheModelCheck) {
  constexpr std::size_t count = std::tuple_size_v<emitted::ThreadAwareDesigns>;
  static_assert(count >= 2, "HKS and the fitted page_segregated test design");
  checkAllThreadAware(std::make_index_sequence<count>{});
}

// A design of one allocator of another mechanism over every size is also emitted as
// Direct<Top>, the allocator over Top without arena or routing (what `heapkit build` ships,
// as libheapkit-lea.so and libheapkit-kingsley.so are built): it passes the model check over
// the hardened MmapHeap, and a free goes back to the same allocator a malloc came from.
template <std::size_t I>
void checkDirect() {
  using Heap = std::tuple_element_t<I, emitted::DirectDesigns>;
  for (const testing::SizeDistribution& sizes : testing::standardDistributions()) {
    SCOPED_TRACE(sizes.name);
    Heap heap;
    testing::ModelChecker<Heap> checker(heap, 47 + I);
    testing::ModelCheckOptions options;
    options.operations = static_cast<std::size_t>(4000 * testScale());
    options.maxLiveObjects = 400;
    checker.run(sizes, options);
  }
}

template <std::size_t... I>
void checkAllDirect(std::index_sequence<I...>) {
  (checkDirect<I>(), ...);
}

TEST(Emitted, DirectDesignsPassTheModelCheck) {
  constexpr std::size_t count = std::tuple_size_v<emitted::DirectDesigns>;
  static_assert(count >= 5, "the single-allocator presets: ALEA, LEA, KNG, FIB, S10");
  checkAllDirect(std::make_index_sequence<count>{});
}

// The shipped libraries' heaps are what emit writes for the presets that describe them.
static_assert(std::is_base_of_v<AdaptiveLeaHeap<Hardened<MmapHeap>>,
                                DirectAllocator<SizeRange<0, kNoBound, AdaptiveLeaHeap>, Hardened<MmapHeap>>>);
static_assert(std::is_base_of_v<KingsleyHeap<Hardened<MmapHeap>>,
                                DirectAllocator<SizeRange<0, kNoBound, KingsleyHeap>, Hardened<MmapHeap>>>);

}  // namespace
}  // namespace heapkit::sim
