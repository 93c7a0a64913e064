// A DMM (dynamic memory manager) design as data: an ordered list of allocators, each
// serving the request sizes in its range (min, max], plus where requests above every
// range go. src/sim/Spec.cpp reads it from JSON and validates it (docs/dmm-spec.md);
// DmmHeap runs it, over simulated or real memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "heapkit/dmm/ShortLivedSizes.h"
#include "heapkit/general/BuddyHeap.h"
#include "heapkit/general/ScalableCoreHeap.h"
#include "heapkit/general/SegregatedFitHeap.h"

namespace heapkit {

enum class Mechanism : std::uint8_t {
  SegregatedLists,          // N classes of doubling lengths, searched upwards
  SegregatedFit,            // the given class sizes, searched upwards
  SimpleSegregatedStorage,  // strict classes, each carving chunks of its own
  ExactSegregatedFit,       // one list per block length
  StrictSegregatedFit,      // requests rounded up to their class; lists hold one length
  BinaryBuddy,
  FibonacciBuddy,
  WeightedBuddy,
  DoubleBuddy,
  Kingsley,  // heapkit's KingsleyHeap
  Lea,       // heapkit's LeaHeap
  Region,    // bump allocation, nothing freed before the end
  PageSegregated,  // heapkit's ScalableCoreHeap (libheapkit.so's single-thread path, less its threads' own segments)
  AdaptiveLea,     // heapkit's AdaptiveLeaHeap (libheapkit-lea.so's heap)
};
inline constexpr std::size_t kMechanismCount = 14;

inline constexpr const char* kMechanismNames[kMechanismCount] = {
    "segregated_lists", "segregated_fit",  "simple_segregated_storage", "exact_segregated_fit",
    "strict_segregated_fit", "binary_buddy", "fibonacci_buddy", "weighted_buddy",
    "double_buddy", "kingsley", "lea", "region", "page_segregated", "adaptive_lea"};

constexpr bool isBuddy(Mechanism m) {
  return m == Mechanism::BinaryBuddy || m == Mechanism::FibonacciBuddy || m == Mechanism::WeightedBuddy ||
         m == Mechanism::DoubleBuddy;
}

// A page_segregated allocator's values: its size classes (up to 64, as SizeClassTable
// takes them) and the rest of ScalableCoreConfig. Defaults are libheapkit.so's. Plain
// values, constant-initialised (libheapkit-dmm.so reads a spec before its initialisers run).
struct PageSegregatedSpec {
  static constexpr std::array<std::size_t, SizeClassTable::kMaxClasses> libheapkitClasses() {
    std::array<std::size_t, SizeClassTable::kMaxClasses> sizes{};
    for (std::size_t i = 0; i < ScalableSizeClasses::count(); ++i) sizes[i] = ScalableSizeClasses::bytesOf(i);
    return sizes;
  }

  std::array<std::size_t, SizeClassTable::kMaxClasses> classBytes = libheapkitClasses();
  std::size_t classCount = ScalableSizeClasses::count();
  LargeObjectConfig large{};
  SuperblockPoolConfig pool{};
  CacheLimits cache = kScalableLargeCacheLimits;
  SegmentConfig segments{};

  std::span<const std::size_t> classes() const { return {classBytes.data(), classCount}; }
  ScalableCoreConfig coreConfig() const {
    ScalableCoreConfig c;
    c.classes = SizeClassTable(classes());
    c.large = large;
    c.pool = pool;
    c.cache = cache;
    c.segments = segments;
    return c;
  }
};

struct AllocatorSpec {
  Mechanism mechanism = Mechanism::Kingsley;
  std::size_t minExclusive = 0;           // serves requests of more than this many bytes
  std::size_t maxInclusive = SIZE_MAX;    // up to this many (SIZE_MAX: no bound)
  SegregatedFitConfig freeLists;          // the free-list mechanisms and region
  BuddyConfig buddy;                      // the buddy systems
  PageSegregatedSpec pageSegregated;      // page_segregated
};

// Placement by lifetime (ShortLivedSizes.h): requests of these sizes go to an allocator
// of their own, whatever range they fall in. Its range fields are unused.
struct ShortLivedSpec {
  ShortLivedSizes sizes;
  AllocatorSpec allocator;
};

struct DmmSpec {
  static constexpr std::size_t kMaxAllocators = 16;
  static constexpr int kFallbackToOs = -1;

  AllocatorSpec allocators[kMaxAllocators];
  std::size_t count = 0;
  // Requests above the last range: kFallbackToOs (pages of their own from the arena, as
  // mmap gives) or the index of the allocator that takes them.
  int fallback = kFallbackToOs;
  // The short-lived area, when the design has one (hasShortLived): allocator count + 1 of
  // the routing (count is the OS fallback).
  bool hasShortLived = false;
  ShortLivedSpec shortLived;
};

// One page_segregated allocator over every size (and no short-lived area): the design libheapkit.so's form takes, a
// heap per thread (threads/ScalableHeap.h). `heapkit build` ships it so, and the simulator
// and the replayer give each thread of a trace its heap (DmmHeap, StaticDmmHeap).
inline bool threadAware(const DmmSpec& dmm) {
  return dmm.count == 1 && !dmm.hasShortLived && dmm.allocators[0].mechanism == Mechanism::PageSegregated &&
         dmm.allocators[0].minExclusive == 0 && dmm.allocators[0].maxInclusive == SIZE_MAX;
}

// One allocator of another mechanism over every size (and no short-lived area): every
// request is its, so the routing and the arena's owner map do nothing a library needs.
// `heapkit build` ships it as heapkit's own single-heap libraries are built, the allocator
// directly over the hardened MmapHeap (StaticDmmHeap.h's DirectAllocator), so that the LEA,
// ALEA and Kingsley presets are libheapkit-lea.so's and libheapkit-kingsley.so's heaps.
inline bool direct(const DmmSpec& dmm) {
  return dmm.count == 1 && !dmm.hasShortLived && !threadAware(dmm) && dmm.allocators[0].minExclusive == 0 &&
         dmm.allocators[0].maxInclusive == SIZE_MAX;
}

}  // namespace heapkit
