// StaticDmmHeap: a DMM design as a type, the form `heapkit emit` writes. The same
// allocators DmmHeap builds from a spec's values at run time, with the values as
// compile-time constants and the routing unrolled, so the compiler inlines through it:
//
//   template <class Top>
//   using Small = heapkit::SegregatedFitHeap<
//       heapkit::FixedBins<32, 64, heapkit::kNoBound>,
//       heapkit::Fits<heapkit::SizeClasses::Ranges, true, true, heapkit::Coalescing::Immediate>,
//       heapkit::Lists<heapkit::ListStructure::DoublyLinked, heapkit::ListFit::First, heapkit::ListOrder::Lifo>,
//       heapkit::TailChunkHeap<heapkit::Chunks<65536>, heapkit::Headers<heapkit::HeaderLayout::BoundaryTags>, Top>>;
//   using Design = heapkit::StaticDmmHeap<heapkit::RealMemory, heapkit::kFallbackToOs,
//                                         heapkit::SizeRange<0, 128, Small>,
//                                         heapkit::SizeRange<128, heapkit::kNoBound, heapkit::LeaHeap>>;
//
// It hands out the same addresses and holds the same bytes as DmmHeap on the same spec
// (tests/sim/emit_test.cpp), and counts the same work over counted memory: both are the
// one routing (DmmRouting) over their allocators. A design that places by lifetime ends
// its list with a ShortLivedArea<Sizes, Allocator, Config> (dmm/ShortLivedSizes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "heapkit/dmm/DmmRouting.h"
#include "heapkit/dmm/ShortLivedSizes.h"
#include "heapkit/top/ArenaHeap.h"

namespace heapkit {

inline constexpr std::size_t kNoBound = SIZE_MAX;

// The allocator a design built from values would take no configuration from.
struct NoConfig {};

// An allocator serving the requests in (MinExclusive, MaxInclusive]: Allocator<Top>
// constructed from (Config{}, arena, owner), or from (arena, owner) without a Config.
template <std::size_t MinExclusive, std::size_t MaxInclusive, template <class> class Allocator, class Config = NoConfig>
struct SizeRange {
  static constexpr std::size_t kMinExclusive = MinExclusive;
  static constexpr std::size_t kMaxInclusive = MaxInclusive;
  template <class Top>
  using Heap = Allocator<Top>;
  using ConfigType = Config;
  static constexpr bool kShortLived = false;
};

// The short-lived area of a design that places by lifetime (dmm/ShortLivedSizes.h):
// requests whose size is in Sizes::sizes (a constexpr ShortLivedSizes), whatever range
// holds them. It comes last, after the design's SizeRanges.
template <class Sizes, template <class> class Allocator, class Config = NoConfig>
struct ShortLivedArea {
  static constexpr std::size_t kMaxInclusive = 0;  // not a range
  template <class Top>
  using Heap = Allocator<Top>;
  using ConfigType = Config;
  static constexpr bool kShortLived = true;
  static constexpr bool contains(std::size_t size) { return Sizes::sizes.contains(size); }
};

namespace staticdmm {
// Allocator I's owner tag: I + 1, and the short-lived area's one more (count() + 2,
// as DmmRouting numbers it).
template <class Range, std::size_t I>
inline constexpr std::uint8_t kOwner = static_cast<std::uint8_t>(I + 1 + (Range::kShortLived ? 1 : 0));

// Allocator I of a design, built in place (heaps neither copy nor move).
template <class Range, class Top, std::size_t I, bool WithoutConfig = std::is_same_v<typename Range::ConfigType, NoConfig>>
struct Slot {
  template <class Arena>
  explicit Slot(Arena& arena) : heap(arena, kOwner<Range, I>) {}
  typename Range::template Heap<Top> heap;
};
template <class Range, class Top, std::size_t I>
struct Slot<Range, Top, I, false> {
  template <class Arena>
  explicit Slot(Arena& arena) : heap(typename Range::ConfigType{}, arena, kOwner<Range, I>) {}
  typename Range::template Heap<Top> heap;
};

template <class Top, class Indices, class... Ranges>
struct Slots;
template <class Top, std::size_t... I, class... Ranges>
struct Slots<Top, std::index_sequence<I...>, Ranges...> : Slot<Ranges, Top, I>... {
  template <class Arena>
  explicit Slots(Arena& arena) : Slot<Ranges, Top, I>(arena)... {}
};
}  // namespace staticdmm

// A design's allocators as types (DmmRouting's Allocators policy): the ranges are
// constants, and visiting allocator i unrolls into a comparison per allocator.
template <class Top, int Fallback, class... Ranges>
class TypedAllocators {
  static constexpr std::size_t kSlots = sizeof...(Ranges);
  template <std::size_t I>
  using RangeAt = std::tuple_element_t<I, std::tuple<Ranges...>>;

 public:
  static constexpr bool kHasShortLived = RangeAt<kSlots - 1>::kShortLived;
  static constexpr std::size_t kMaxCount = kSlots - (kHasShortLived ? 1 : 0);
  static_assert(kMaxCount >= 1 && kMaxCount < 253, "a design has 1 to 252 allocators");
  static_assert(Fallback == kFallbackToOs || (Fallback >= 0 && Fallback < static_cast<int>(kMaxCount)));
  static_assert(((Ranges::kShortLived ? 1 : 0) + ...) == (kHasShortLived ? 1 : 0),
                "one short-lived area at most, after the ranges");

  template <class Arena>
  explicit TypedAllocators(Arena& arena) : slots_(arena) {}

  static constexpr std::size_t count() { return kMaxCount; }
  static constexpr std::size_t maxInclusive(std::size_t i) { return kMaxInclusive[i]; }
  static constexpr int fallback() { return Fallback; }
  static constexpr bool hasShortLived() { return kHasShortLived; }
  static constexpr bool isShortLived(std::size_t size) {
    if constexpr (kHasShortLived) return RangeAt<kSlots - 1>::contains(size);
    else return false;
  }

  // i: an allocator's index, or count() + 1 for the short-lived area (the last slot).
  template <class F>
  decltype(auto) visit(std::size_t i, F&& f) {
    return visitFrom<0>(kHasShortLived && i == kMaxCount + 1 ? kMaxCount : i, f);
  }
  // Each allocator gives its memory back when the slots are destroyed, before the arena.
  void release() {}

 private:
  static constexpr std::size_t kMaxInclusive[] = {Ranges::kMaxInclusive...};

  template <std::size_t I, class F>
  decltype(auto) visitFrom(std::size_t slot, F& f) {
    auto& heap = static_cast<staticdmm::Slot<RangeAt<I>, Top, I>&>(slots_).heap;
    if constexpr (I + 1 == kSlots) {
      return f(heap);
    } else {
      if (slot == I) return f(heap);
      return visitFrom<I + 1>(slot, f);
    }
  }

  staticdmm::Slots<Top, std::index_sequence_for<Ranges...>, Ranges...> slots_;
};

// A design of one allocator over every size (dmm/DmmSpec.h's direct()), as heapkit's
// single-heap libraries are built: the allocator of Range directly over Top (the hardened
// MmapHeap), built from its Config, without the arena and the routing, which would only
// look up an owner that is always the same. Its addresses are the OS's, not the arena's,
// so it is the design the simulator ran (and Dmm<RealMemory> replays to the byte) up to
// where its pages land.
template <class Range, class Top>
class DirectAllocator : public Range::template Heap<Top> {
  using Allocator = typename Range::template Heap<Top>;
  static_assert(Range::kMinExclusive == 0 && Range::kMaxInclusive == kNoBound, "an allocator over every size");

 public:
  DirectAllocator()
    requires std::is_same_v<typename Range::ConfigType, NoConfig>
  = default;
  DirectAllocator()
    requires(!std::is_same_v<typename Range::ConfigType, NoConfig>)
      : Allocator(typename Range::ConfigType{}) {}
};

template <class Memory, int Fallback, class... Ranges>
class StaticDmmHeap : public DmmRouting<Memory, TypedAllocators<ArenaHeap<ReservedArena<Memory>>, Fallback, Ranges...>> {
  using Routing = DmmRouting<Memory, TypedAllocators<ArenaHeap<ReservedArena<Memory>>, Fallback, Ranges...>>;

 public:
  using Arena = typename Routing::Arena;
  // The design's allocators of size ranges (its short-lived area, if any, not counted).
  static constexpr std::size_t kCount = TypedAllocators<ArenaHeap<ReservedArena<Memory>>, Fallback, Ranges...>::kMaxCount;

  explicit StaticDmmHeap(std::size_t reserveBytes = Arena::kDefaultReserveBytes) : Routing(reserveBytes) {}
};

}  // namespace heapkit
