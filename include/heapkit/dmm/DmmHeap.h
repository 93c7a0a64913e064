// DmmHeap: a DMM design (DmmSpec) as a heap. Each allocator of the design is a heap-layers
// composition over its own view of one shared arena (ArenaHeap), built from the spec's
// values at run time, so the simulator evaluates any design without a compiler:
//   segregated lists and fits, strict, exact, simple segregated storage, region:
//     ConfiguredSegregatedFitHeap<ArenaHeap>
//   kingsley: KingsleyHeap<ArenaHeap>        lea: LeaHeap<ArenaHeap>
//   adaptive_lea: AdaptiveLeaHeap<ArenaHeap> (libheapkit-lea.so's heap)
//   buddy systems: BuddyHeap<BuddyConfig, ArenaHeap>
//   page_segregated: ScalableCoreHeap<SizeClassTable, ArenaHeap> (libheapkit.so's
//     single-thread path with the spec's classes and ScalableCoreConfig); a design of one
//     page_segregated allocator over every size (threadAware(spec)) is libheapkit.so's
//     form, ScalableHeap<ArenaHeap, SizeClassTable, ScalableCoreConfig, SelectedThreadHeaps>:
//     a heap per thread of the trace, which selectThread() names
//   the OS fallback: ArenaHeap itself (pages of their own, as mmap)
//   the short-lived area (placement by lifetime, dmm/ShortLivedSizes.h): any of the above
//
// A request goes to the first allocator whose range holds its size; a free goes to the
// allocator whose arena extent holds the pointer (the arena's owner tags): the routing
// StaticDmmHeap shares (DmmRouting). Memory is the
// arena's kind: SimulatedMemory in the simulator, RealMemory in libheapkit-dmm.so and
// `heapkit replay -a spec:FILE`. With the same spec and the same requests both hand out
// the same offsets and hold the same bytes (tests/sim/fidelity_test.cpp).
//
// The footprint is the arena's resident bytes: what it holds less the pages a layer gave
// back (purge; only page_segregated's segments do), as a process's RSS counts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <variant>

#include "heapkit/dmm/DmmRouting.h"
#include "heapkit/dmm/DmmSpec.h"
#include "heapkit/general/AdaptiveLeaHeap.h"
#include "heapkit/general/BuddyHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/general/ScalableCoreHeap.h"
#include "heapkit/general/SegregatedFitHeap.h"
#include "heapkit/threads/ScalableHeap.h"
#include "heapkit/threads/SelectedThreadHeaps.h"
#include "heapkit/top/ArenaHeap.h"

namespace heapkit {

namespace dmm {
// A spec's allocators, each one of the mechanisms' heaps, chosen at run time (DmmRouting's
// Allocators policy).
template <class Memory>
class SpecAllocators {
 public:
  using Top = ArenaHeap<ReservedArena<Memory>>;
  using FreeListAllocator = ConfiguredSegregatedFitHeap<Top>;
  using KingsleyAllocator = KingsleyHeap<Top>;
  using LeaAllocator = LeaHeap<Top>;
  using BuddyAllocator = BuddyHeap<BuddyConfig, Top>;
  using AdaptiveLeaAllocator = AdaptiveLeaHeap<Top>;
  using PageSegregatedAllocator = ScalableCoreHeap<SizeClassTable, Top>;
  using ThreadAwareAllocator = ScalableHeap<Top, SizeClassTable, ScalableCoreConfig, SelectedThreadHeaps>;
  using Allocator = std::variant<std::monostate, FreeListAllocator, KingsleyAllocator, LeaAllocator, BuddyAllocator,
                                 AdaptiveLeaAllocator, PageSegregatedAllocator, ThreadAwareAllocator>;
  static_assert(dmmalign::alignsItself<PageSegregatedAllocator> && dmmalign::alignsItself<ThreadAwareAllocator> &&
                !dmmalign::alignsItself<LeaAllocator> &&
                !dmmalign::alignsItself<KingsleyAllocator> && !dmmalign::alignsItself<FreeListAllocator> &&
                !dmmalign::alignsItself<BuddyAllocator> && !dmmalign::alignsItself<AdaptiveLeaAllocator>);
  static constexpr std::size_t kMaxCount = DmmSpec::kMaxAllocators;
  static_assert(DmmSpec::kFallbackToOs == kFallbackToOs);

  SpecAllocators(ReservedArena<Memory>& arena, const DmmSpec& spec)
      : count_(spec.count), fallback_(spec.fallback), hasShortLived_(spec.hasShortLived) {
    for (std::size_t i = 0; i < count_; ++i) {
      maxInclusive_[i] = spec.allocators[i].maxInclusive;
      build(allocators_[i], spec.allocators[i], arena, static_cast<std::uint8_t>(i + 1), threadAware(spec));
    }
    if (hasShortLived_) {
      shortLived_ = spec.shortLived.sizes;
      build(allocators_[kShortLivedSlot], spec.shortLived.allocator, arena, static_cast<std::uint8_t>(count_ + 2), false);
    }
  }

  std::size_t count() const { return count_; }
  std::size_t maxInclusive(std::size_t i) const { return maxInclusive_[i]; }
  int fallback() const { return fallback_; }
  bool hasShortLived() const { return hasShortLived_; }
  bool isShortLived(std::size_t size) const { return shortLived_.contains(size); }

  // f(allocator i); an empty slot (never routed to) gives f's result type's default.
  template <class F>
  decltype(auto) visit(std::size_t i, F&& f) {
    return std::visit(
        [&f](auto& heap) -> decltype(f(std::declval<KingsleyAllocator&>())) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(heap)>, std::monostate>) {
            using Result = decltype(f(std::declval<KingsleyAllocator&>()));
            if constexpr (!std::is_void_v<Result>) return Result{};
          } else {
            return f(heap);
          }
        },
        allocators_[i == count_ + 1 ? kShortLivedSlot : i]);
  }

  // The allocators give their chunks back to the arena before it unmaps.
  void release() {
    for (std::size_t i = 0; i < count_; ++i) allocators_[i].template emplace<std::monostate>();
    allocators_[kShortLivedSlot].template emplace<std::monostate>();
  }

 private:
  static constexpr std::size_t kShortLivedSlot = kMaxCount;

  // threadAware: the design is one page_segregated allocator over every size, simulated as
  // a heap per trace thread (DmmSpec.h's threadAware).
  static void build(Allocator& slot, const AllocatorSpec& allocator, ReservedArena<Memory>& arena, std::uint8_t owner,
                    bool threadAware) {
    switch (allocator.mechanism) {
      case Mechanism::Kingsley: slot.template emplace<KingsleyAllocator>(arena, owner); break;
      case Mechanism::Lea: slot.template emplace<LeaAllocator>(arena, owner); break;
      case Mechanism::AdaptiveLea: slot.template emplace<AdaptiveLeaAllocator>(arena, owner); break;
      case Mechanism::PageSegregated:
        if (threadAware)
          slot.template emplace<ThreadAwareAllocator>(allocator.pageSegregated.coreConfig(), arena, owner);
        else
          slot.template emplace<PageSegregatedAllocator>(allocator.pageSegregated.coreConfig(), arena, owner);
        break;
      case Mechanism::BinaryBuddy:
      case Mechanism::FibonacciBuddy:
      case Mechanism::WeightedBuddy:
      case Mechanism::DoubleBuddy:
        slot.template emplace<BuddyAllocator>(allocator.buddy, arena, owner);
        break;
      default: slot.template emplace<FreeListAllocator>(allocator.freeLists, arena, owner); break;
    }
  }

  std::size_t count_;
  int fallback_;
  bool hasShortLived_;
  ShortLivedSizes shortLived_;
  std::size_t maxInclusive_[kMaxCount] = {};
  Allocator allocators_[kMaxCount + 1];  // the last: the short-lived area
};
}  // namespace dmm

template <class Memory>
class DmmHeap : public DmmRouting<Memory, dmm::SpecAllocators<Memory>> {
  using Routing = DmmRouting<Memory, dmm::SpecAllocators<Memory>>;

 public:
  using Arena = typename Routing::Arena;

  explicit DmmHeap(const DmmSpec& spec, std::size_t reserveBytes = Arena::kDefaultReserveBytes)
      : Routing(reserveBytes, spec) {}
};

}  // namespace heapkit
