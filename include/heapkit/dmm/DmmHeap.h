// DmmHeap: a DMM design (DmmSpec) as a heap. Each allocator of the design is a heap-layers
// composition over its own view of one shared arena (ArenaHeap), built from the spec's
// values at run time, so the simulator evaluates any design without a compiler:
//   segregated lists and fits, strict, exact, simple segregated storage, region:
//     SegregatedFitHeap<SegregatedFitConfig, ArenaHeap>
//   kingsley: KingsleyHeap<ArenaHeap>        lea: LeaHeap<ArenaHeap>
//   buddy systems: BuddyHeap<BuddyConfig, ArenaHeap>
//   the OS fallback: ArenaHeap itself (pages of their own, as mmap)
//
// A request goes to the first allocator whose range holds its size; a free goes to the
// allocator whose arena extent holds the pointer (the arena's owner tags). Memory is the
// arena's kind: SimulatedMemory in the simulator, RealMemory in libheapkit-dmm.so and
// `heapkit replay -a spec:FILE`. With the same spec and the same requests both hand out
// the same offsets and hold the same bytes (tests/sim/fidelity_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <variant>

#include "heapkit/core/Counting.h"
#include "heapkit/dmm/DmmSpec.h"
#include "heapkit/general/BuddyHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/general/SegregatedFitHeap.h"
#include "heapkit/top/ArenaHeap.h"

namespace heapkit {

// What one allocator of a design served: the DMM map's figures.
struct AllocatorUsage {
  std::uint64_t requests = 0;
  std::uint64_t requestedBytes = 0;
};

template <class Memory>
class DmmHeap {
 public:
  using Arena = ReservedArena<Memory>;
  using Top = ArenaHeap<Arena>;
  using FreeListAllocator = SegregatedFitHeap<SegregatedFitConfig, Top>;
  using KingsleyAllocator = KingsleyHeap<Top>;
  using LeaAllocator = LeaHeap<Top>;
  using BuddyAllocator = BuddyHeap<BuddyConfig, Top>;
  using Allocator = std::variant<std::monostate, FreeListAllocator, KingsleyAllocator, LeaAllocator, BuddyAllocator>;

  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr bool SimulatesData = Memory::kSimulatesData;
  static constexpr std::uint8_t kFallbackOwner = 255;

  explicit DmmHeap(const DmmSpec& spec, std::size_t reserveBytes = Arena::kDefaultReserveBytes)
      : arena_(reserveBytes), fallbackHeap_(arena_, kFallbackOwner), count_(spec.count), fallback_(spec.fallback) {
    for (std::size_t i = 0; i < count_; ++i) {
      const AllocatorSpec& allocator = spec.allocators[i];
      maxInclusive_[i] = allocator.maxInclusive;
      auto owner = static_cast<std::uint8_t>(i + 1);
      switch (allocator.mechanism) {
        case Mechanism::Kingsley: allocators_[i].template emplace<KingsleyAllocator>(arena_, owner); break;
        case Mechanism::Lea: allocators_[i].template emplace<LeaAllocator>(arena_, owner); break;
        case Mechanism::BinaryBuddy:
        case Mechanism::FibonacciBuddy:
        case Mechanism::WeightedBuddy:
        case Mechanism::DoubleBuddy:
          allocators_[i].template emplace<BuddyAllocator>(allocator.buddy, arena_, owner);
          break;
        default: allocators_[i].template emplace<FreeListAllocator>(allocator.freeLists, arena_, owner); break;
      }
    }
  }
  DmmHeap(const DmmHeap&) = delete;
  DmmHeap& operator=(const DmmHeap&) = delete;

  ~DmmHeap() {
    // The allocators give their chunks back to the arena before it unmaps.
    for (std::size_t i = 0; i < count_; ++i) allocators_[i].template emplace<std::monostate>();
  }

  void* malloc(std::size_t size) {
    std::size_t index = allocatorFor(size);
    if constexpr (Memory::kCounts) {
      usage_[index].requests += 1;
      usage_[index].requestedBytes += size;
    }
    if (index == count_) return fallbackHeap_.malloc(size);
    return std::visit([size](auto& heap) -> void* { return mallocFrom(heap, size); }, allocators_[index]);
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::uint8_t owner = arena_.ownerOf(*this, object);
    countStep(*this);  // the owner looked up
    if (owner == kFallbackOwner) return fallbackHeap_.free(object);
    std::visit([object](auto& heap) { freeTo(heap, object); }, allocators_[owner - 1]);
  }

  // Inside an extent of the arena that an allocator or the fallback holds (HardenedHeap
  // refuses other pointers: free would index the allocators with no owner).
  bool owns(const void* object) const { return arena_.ownerOf(object) != Arena::kNoOwner; }

  std::size_t getSize(void* object) {
    std::uint8_t owner = arena_.ownerOf(object);
    if (owner == kFallbackOwner) return fallbackHeap_.getSize(object);
    return std::visit([object](auto& heap) -> std::size_t { return sizeIn(heap, object); }, allocators_[owner - 1]);
  }

  std::size_t bytesHeld() const { return arena_.bytesHeld(); }
  std::size_t peakBytesHeld() const { return arena_.peakBytesHeld(); }
  // What allocator i holds now and at its own peak (i == count(): the OS fallback).
  std::size_t bytesHeldBy(std::size_t i) const {
    if (i == count_) return fallbackHeap_.bytesHeld();
    return std::visit([](const auto& heap) -> std::size_t { return heldBy(heap); }, allocators_[i]);
  }
  std::size_t peakBytesHeldBy(std::size_t i) const {
    if (i == count_) return fallbackHeap_.peakBytesHeld();
    return std::visit([](const auto& heap) -> std::size_t { return peakHeldBy(heap); }, allocators_[i]);
  }
  // Requests each allocator served; index count() is the OS fallback.
  const AllocatorUsage& usage(std::size_t i) const { return usage_[i]; }
  std::size_t count() const { return count_; }
  const Arena& arena() const { return arena_; }

  WorkCounts& workCounts()
    requires Memory::kCounts
  {
    return arena_.workCounts();
  }

 private:
  std::size_t allocatorFor(std::size_t size) {
    for (std::size_t i = 0; i < count_; ++i) {
      countStep(*this);  // a range compared
      if (size <= maxInclusive_[i]) return i;
    }
    return fallback_ == DmmSpec::kFallbackToOs ? count_ : static_cast<std::size_t>(fallback_);
  }

  template <class H>
  static void* mallocFrom(H& heap, std::size_t size) {
    if constexpr (std::is_same_v<H, std::monostate>) return nullptr;
    else return heap.malloc(size);
  }
  template <class H>
  static void freeTo(H& heap, void* object) {
    if constexpr (!std::is_same_v<H, std::monostate>) heap.free(object);
  }
  template <class H>
  static std::size_t sizeIn(H& heap, void* object) {
    if constexpr (std::is_same_v<H, std::monostate>) return 0;
    else return heap.getSize(object);
  }
  template <class H>
  static std::size_t heldBy(const H& heap) {
    if constexpr (std::is_same_v<H, std::monostate>) return 0;
    else return heap.bytesHeld();
  }
  template <class H>
  static std::size_t peakHeldBy(const H& heap) {
    if constexpr (std::is_same_v<H, std::monostate>) return 0;
    else return heap.peakBytesHeld();
  }

  Arena arena_;
  Top fallbackHeap_;
  std::size_t count_;
  int fallback_;
  std::size_t maxInclusive_[DmmSpec::kMaxAllocators] = {};
  AllocatorUsage usage_[DmmSpec::kMaxAllocators + 1] = {};
  Allocator allocators_[DmmSpec::kMaxAllocators];
};

}  // namespace heapkit
