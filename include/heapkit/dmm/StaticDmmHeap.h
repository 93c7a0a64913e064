// StaticDmmHeap: a DMM design as a type, the form `heapkit emit` writes. The same
// allocators DmmHeap builds from a spec's values at run time, with the values as
// compile-time constants and the routing unrolled, so the compiler inlines through it:
//
//   template <class Top> using Small = heapkit::SegregatedFitHeap<SmallConfig, Top>;
//   using Design = heapkit::StaticDmmHeap<heapkit::RealMemory, heapkit::kFallbackToOs,
//                                         heapkit::SizeRange<0, 128, Small, SmallConfig>,
//                                         heapkit::SizeRange<128, heapkit::kNoBound, heapkit::LeaHeap>>;
//
// It hands out the same addresses and holds the same bytes as DmmHeap on the same spec
// (tests/sim/emit_test.cpp), and counts the same work over counted memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/top/ArenaHeap.h"

namespace heapkit {

inline constexpr std::size_t kNoBound = SIZE_MAX;
inline constexpr int kFallbackToOs = -1;

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
};

namespace staticdmm {
// Allocator I of a design, built in place (heaps neither copy nor move).
template <class Range, class Top, std::size_t I, bool WithoutConfig = std::is_same_v<typename Range::ConfigType, NoConfig>>
struct Slot {
  template <class Arena>
  explicit Slot(Arena& arena) : heap(arena, static_cast<std::uint8_t>(I + 1)) {}
  typename Range::template Heap<Top> heap;
};
template <class Range, class Top, std::size_t I>
struct Slot<Range, Top, I, false> {
  template <class Arena>
  explicit Slot(Arena& arena) : heap(typename Range::ConfigType{}, arena, static_cast<std::uint8_t>(I + 1)) {}
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

template <class Memory, int Fallback, class... Ranges>
class StaticDmmHeap {
 public:
  using Arena = ReservedArena<Memory>;
  using Top = ArenaHeap<Arena>;
  static constexpr std::size_t kCount = sizeof...(Ranges);
  static_assert(kCount >= 1 && kCount < 255, "a design has 1 to 254 allocators");
  static_assert(Fallback == kFallbackToOs || (Fallback >= 0 && Fallback < static_cast<int>(kCount)));

  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr bool SimulatesData = Memory::kSimulatesData;
  static constexpr std::uint8_t kFallbackOwner = 255;

  explicit StaticDmmHeap(std::size_t reserveBytes = Arena::kDefaultReserveBytes)
      : arena_(reserveBytes), fallbackHeap_(arena_, kFallbackOwner), slots_(arena_) {}
  StaticDmmHeap(const StaticDmmHeap&) = delete;
  StaticDmmHeap& operator=(const StaticDmmHeap&) = delete;

  void* malloc(std::size_t size) { return mallocFrom<0>(size); }

  void free(void* object) {
    if (object == nullptr) return;
    std::uint8_t owner = arena_.ownerOf(*this, object);
    countStep(*this);  // the owner looked up
    if (owner == kFallbackOwner) return fallbackHeap_.free(object);
    freeTo<0>(owner, object);
  }

  std::size_t getSize(void* object) {
    std::uint8_t owner = arena_.ownerOf(object);
    if (owner == kFallbackOwner) return fallbackHeap_.getSize(object);
    return sizeIn<0>(owner, object);
  }

  std::size_t bytesHeld() const { return arena_.bytesHeld(); }
  std::size_t peakBytesHeld() const { return arena_.peakBytesHeld(); }
  const Arena& arena() const { return arena_; }

  WorkCounts& workCounts()
    requires Memory::kCounts
  {
    return arena_.workCounts();
  }

 private:
  template <std::size_t I>
  using RangeAt = std::tuple_element_t<I, std::tuple<Ranges...>>;
  template <std::size_t I>
  auto& allocator() {
    return static_cast<staticdmm::Slot<RangeAt<I>, Top, I>&>(slots_).heap;
  }

  // The first range that holds the size; one step per range compared, as DmmHeap counts.
  template <std::size_t I>
  void* mallocFrom(std::size_t size) {
    if constexpr (I == kCount) {
      if constexpr (Fallback == kFallbackToOs) return fallbackHeap_.malloc(size);
      else return allocator<static_cast<std::size_t>(Fallback)>().malloc(size);
    } else {
      countStep(*this);  // a range compared
      if (size <= RangeAt<I>::kMaxInclusive) return allocator<I>().malloc(size);
      return mallocFrom<I + 1>(size);
    }
  }
  template <std::size_t I>
  void freeTo(std::uint8_t owner, void* object) {
    if constexpr (I < kCount) {
      if (owner == I + 1) return allocator<I>().free(object);
      freeTo<I + 1>(owner, object);
    }
  }
  template <std::size_t I>
  std::size_t sizeIn(std::uint8_t owner, void* object) {
    if constexpr (I == kCount) {
      return 0;
    } else {
      if (owner == I + 1) return allocator<I>().getSize(object);
      return sizeIn<I + 1>(owner, object);
    }
  }

  Arena arena_;
  Top fallbackHeap_;
  staticdmm::Slots<Top, std::index_sequence_for<Ranges...>, Ranges...> slots_;
};

}  // namespace heapkit
