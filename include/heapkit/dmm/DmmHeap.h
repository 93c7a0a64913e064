// DmmHeap: a DMM design (DmmSpec) as a heap. Each allocator of the design is a heap-layers
// composition over its own view of one shared arena (ArenaHeap), built from the spec's
// values at run time, so the simulator evaluates any design without a compiler:
//   segregated lists and fits, strict, exact, simple segregated storage, region:
//     SegregatedFitHeap<SegregatedFitConfig, ArenaHeap>
//   kingsley: KingsleyHeap<ArenaHeap>        lea: LeaHeap<ArenaHeap>
//   adaptive_lea: AdaptiveLeaHeap<ArenaHeap> (libheapkit-lea.so's heap)
//   buddy systems: BuddyHeap<BuddyConfig, ArenaHeap>
//   page_segregated: ScalableCoreHeap<SizeClassTable, ArenaHeap> (libheapkit.so's
//     single-thread path with the spec's classes and ScalableCoreConfig)
//   the OS fallback: ArenaHeap itself (pages of their own, as mmap)
//
// A request goes to the first allocator whose range holds its size; a free goes to the
// allocator whose arena extent holds the pointer (the arena's owner tags). Memory is the
// arena's kind: SimulatedMemory in the simulator, RealMemory in libheapkit-dmm.so and
// `heapkit replay -a spec:FILE`. With the same spec and the same requests both hand out
// the same offsets and hold the same bytes (tests/sim/fidelity_test.cpp).
//
// The footprint is the arena's resident bytes: what it holds less the pages a layer gave
// back (purge; only page_segregated's segments do), as a process's RSS counts them.
#pragma once

#include <cstddef>
#include <concepts>
#include <cstdint>
#include <new>
#include <type_traits>
#include <variant>

#include "heapkit/core/Counting.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/dmm/DmmSpec.h"
#include "heapkit/general/AdaptiveLeaHeap.h"
#include "heapkit/general/BuddyHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/general/ScalableCoreHeap.h"
#include "heapkit/general/SegregatedFitHeap.h"
#include "heapkit/top/ArenaHeap.h"

namespace heapkit {

// Aligned objects in allocators that keep size words, as ANSIWrapper lays them out: the
// word before an aligned pointer inside a bigger object holds its offset from the object,
// with the top bit set (a size word never has it).
namespace dmmalign {
inline constexpr std::size_t kAlignedTag = std::size_t{1} << (sizeof(std::size_t) * 8 - 1);

inline void* tag(void* base, std::size_t alignment) {
  if (base == nullptr) return nullptr;
  auto address = reinterpret_cast<std::uintptr_t>(base);
  std::uintptr_t aligned = alignUp(address, alignment);
  if (aligned == address) return base;
  // At least 16 bytes in, so the tag word lies inside the real object.
  *sizeword::wordOf(reinterpret_cast<void*>(aligned)) = kAlignedTag | (aligned - address);
  return reinterpret_cast<void*>(aligned);
}
inline void* realObject(void* object) {
  std::size_t word = *sizeword::wordOf(object);
  if (word & kAlignedTag) return static_cast<char*>(object) - (word & ~kAlignedTag);
  return object;
}
template <class H>
std::size_t sizeIn(H& heap, void* object) {
  void* real = realObject(object);
  return heap.getSize(real) - static_cast<std::size_t>(static_cast<char*>(object) - static_cast<char*>(real));
}
// An allocator that aligns objects itself (page_segregated's, which has no size words).
template <class H>
inline constexpr bool alignsItself = requires(H& heap, std::size_t n) {
  { heap.memalign(n, n) } -> std::same_as<void*>;
};
}  // namespace dmmalign

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
  using AdaptiveLeaAllocator = AdaptiveLeaHeap<Top>;
  using PageSegregatedAllocator = ScalableCoreHeap<SizeClassTable, Top>;
  using Allocator = std::variant<std::monostate, FreeListAllocator, KingsleyAllocator, LeaAllocator, BuddyAllocator,
                                 AdaptiveLeaAllocator, PageSegregatedAllocator>;

  static constexpr std::size_t Alignment = kMinAlignment;
  // No: page_segregated's objects have no size word (memalign is DmmHeap's own instead).
  static constexpr bool KeepsSizeWord = false;
  static constexpr bool SimulatesData = Memory::kSimulatesData;
  static constexpr std::uint8_t kFallbackOwner = 255;
  static_assert(dmmalign::alignsItself<PageSegregatedAllocator> && !dmmalign::alignsItself<LeaAllocator> &&
                !dmmalign::alignsItself<KingsleyAllocator> && !dmmalign::alignsItself<FreeListAllocator> &&
                !dmmalign::alignsItself<BuddyAllocator> && !dmmalign::alignsItself<AdaptiveLeaAllocator>);

  explicit DmmHeap(const DmmSpec& spec, std::size_t reserveBytes = Arena::kDefaultReserveBytes)
      : arena_(reserveBytes), fallbackHeap_(arena_, kFallbackOwner), count_(spec.count), fallback_(spec.fallback) {
    for (std::size_t i = 0; i < count_; ++i) {
      const AllocatorSpec& allocator = spec.allocators[i];
      maxInclusive_[i] = allocator.maxInclusive;
      auto owner = static_cast<std::uint8_t>(i + 1);
      switch (allocator.mechanism) {
        case Mechanism::Kingsley: allocators_[i].template emplace<KingsleyAllocator>(arena_, owner); break;
        case Mechanism::Lea: allocators_[i].template emplace<LeaAllocator>(arena_, owner); break;
        case Mechanism::AdaptiveLea: allocators_[i].template emplace<AdaptiveLeaAllocator>(arena_, owner); break;
        case Mechanism::PageSegregated:
          allocators_[i].template emplace<PageSegregatedAllocator>(allocator.pageSegregated.coreConfig(), arena_, owner);
          break;
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

  // Aligned objects (docs/dmm-spec.md): routed by the padded size, size + alignment - 16,
  // as ANSIWrapper over-allocates over heaps of size words. A page_segregated allocator
  // aligns by itself (it has no size words); the others get the padded object, and the
  // word before the aligned pointer holds its offset, tagged (dmmalign::tag).
  void* memalign(std::size_t alignment, std::size_t size) {
    if (alignment <= kMinAlignment) return malloc(size);
    if (size > SIZE_MAX / 2 - alignment) return nullptr;
    std::size_t padded = size + alignment - kMinAlignment;
    std::size_t index = allocatorFor(padded);
    if constexpr (Memory::kCounts) {
      usage_[index].requests += 1;
      usage_[index].requestedBytes += padded;
    }
    if (index < count_ && std::holds_alternative<PageSegregatedAllocator>(allocators_[index]))  // alignsItself
      return std::get<PageSegregatedAllocator>(allocators_[index]).memalign(alignment, size);
    void* base = index == count_ ? fallbackHeap_.malloc(padded)
                                 : std::visit([padded](auto& heap) -> void* { return mallocFrom(heap, padded); },
                                              allocators_[index]);
    return dmmalign::tag(base, alignment);
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::uint8_t owner = arena_.ownerOf(object);
    countWork(*this, 1, 1, 0);
    if (owner == kFallbackOwner) return fallbackHeap_.free(dmmalign::realObject(object));
    std::visit([object](auto& heap) { freeTo(heap, object); }, allocators_[owner - 1]);
  }

  // Inside an extent of the arena that an allocator or the fallback holds (HardenedHeap
  // refuses other pointers: free would index the allocators with no owner).
  bool owns(const void* object) const { return arena_.ownerOf(object) != Arena::kNoOwner; }

  std::size_t getSize(void* object) {
    std::uint8_t owner = arena_.ownerOf(object);
    if (owner == kFallbackOwner) return dmmalign::sizeIn(fallbackHeap_, object);
    return std::visit([object](auto& heap) -> std::size_t { return sizeIn(heap, object); }, allocators_[owner - 1]);
  }

  std::size_t bytesHeld() const { return arena_.bytesHeld(); }
  std::size_t peakBytesHeld() const { return arena_.peakBytesHeld(); }
  // Bytes held less the pages purged: the footprint (equal to bytes held unless a layer purges).
  std::size_t residentBytes() const { return arena_.residentBytes(); }
  std::size_t peakResidentBytes() const { return arena_.peakResidentBytes(); }
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
      countWork(*this, 1, 0, 0);
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
    if constexpr (std::is_same_v<H, PageSegregatedAllocator>) heap.free(object);
    else if constexpr (!std::is_same_v<H, std::monostate>) heap.free(dmmalign::realObject(object));
  }
  template <class H>
  static std::size_t sizeIn(H& heap, void* object) {
    if constexpr (std::is_same_v<H, std::monostate>) return 0;
    else if constexpr (std::is_same_v<H, PageSegregatedAllocator>) return heap.getSize(object);
    else return dmmalign::sizeIn(heap, object);
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
