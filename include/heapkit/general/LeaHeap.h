// LeaHeap: Doug Lea's allocator (dlmalloc 2.7) as a composition.
//  - small objects (<= 128 B): exact-size quick lists, no coalescing on free;
//  - medium objects: approximate best fit over segregated bins (exact 16-byte steps to
//    1 KiB, then four bins per power of two), with splitting and coalescing; the quick
//    lists are consolidated when a medium request cannot otherwise be met;
//  - large objects (> 128 KiB): mmap, unmapped on free;
//  - wholly free regions go back to the OS beyond a 128 KiB trim threshold.
//
//   SelectMmapHeap<128 KiB,
//     QuickListHeap<128 B,
//       CoalesceHeap<SegHeap<105 classes, AdaptHeap<DLList> per class,
//         CoalesceableHeap<64 KiB regions, ThresholdHeap<128 KiB, Top>>>>>>
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "heapkit/building/AdaptHeap.h"
#include "heapkit/building/CoalesceHeap.h"
#include "heapkit/building/DLList.h"
#include "heapkit/combining/QuickListHeap.h"
#include "heapkit/combining/SegHeap.h"
#include "heapkit/combining/SelectMmapHeap.h"
#include "heapkit/combining/ThresholdHeap.h"
#include "heapkit/objectrep/CoalesceableHeap.h"
#include "heapkit/top/ArenaHeap.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

namespace lea {
inline constexpr std::size_t kQuickMaxBytes = 128;
inline constexpr std::size_t kMmapThreshold = 128 * 1024;
// Regions grow the heap in dlmalloc's default granularity: a bigger unit is footprint a
// small program never uses (glibc's first arena is 132 KiB).
inline constexpr std::size_t kRegionBytes = 64 * 1024;
// Keep up to glibc's default M_TRIM_THRESHOLD of wholly free regions before unmapping.
inline constexpr std::size_t kTrimThreshold = 128 * 1024;

inline constexpr std::size_t kExactClasses = 65;   // 0, 16, ..., 1024
inline constexpr std::size_t kClassesPerDoubling = 4;
inline constexpr std::size_t kNumBins = kExactClasses + kClassesPerDoubling * 10;  // last one unbounded

constexpr std::size_t sizeToClass(std::size_t size) {
  if (size <= 1024) return (size + 15) / 16;
  std::size_t log2 = static_cast<std::size_t>(std::bit_width(size - 1)) - 1;  // size in (2^log2, 2^(log2+1)]
  std::size_t sub = ((size - 1) >> (log2 - 2)) & 3;
  std::size_t sizeClass = kExactClasses + (log2 - 10) * kClassesPerDoubling + sub;
  return sizeClass < kNumBins ? sizeClass : kNumBins - 1;
}

constexpr std::size_t classToMaxSize(std::size_t sizeClass) {
  if (sizeClass < kExactClasses) return sizeClass * 16;
  if (sizeClass + 1 >= kNumBins) return SIZE_MAX;
  std::size_t log2 = 10 + (sizeClass - kExactClasses) / kClassesPerDoubling;
  std::size_t sub = (sizeClass - kExactClasses) % kClassesPerDoubling;
  return (std::size_t{1} << log2) + (sub + 1) * (std::size_t{1} << (log2 - 2));
}

static_assert(sizeToClass(1024) == 64 && sizeToClass(1025) == 65 && classToMaxSize(65) == 1280 &&
              sizeToClass(2048) == 68 && classToMaxSize(68) == 2048 && sizeToClass(2049) == 69);

using Classes = FunctionBins<kNumBins, sizeToClass, classToMaxSize>;

template <class Parent>
using Bin = AdaptHeap<DLList, Parent>;
}  // namespace lea

// Lea's approximate best fit over the bins, with splitting and coalescing, over any layer
// of blocks with boundary tags: CoalesceableHeap's regions here, a reap's chunks in
// special/ReapHeap.h.
template <SizedHeap BoundaryTagHeap>
using LeaCoalescingHeap = CoalesceHeap<SegHeap<lea::Classes, lea::Bin, BoundaryTagHeap>>;

// Everything but the mmap path: usable on its own over a StaticHeap or SbrkHeap. TrimHeap
// keeps wholly free regions before they go back to Top: dlmalloc's fixed trim threshold
// here, glibc's rising one in AdaptiveLeaHeap (AdaptiveThresholdHeap).
template <Heap Top = MmapHeap, template <std::size_t, class> class TrimHeap = ThresholdHeap>
class LeaCoreHeap
    : public QuickListHeap<lea::kQuickMaxBytes,
                           LeaCoalescingHeap<CoalesceableHeap<lea::kRegionBytes, TrimHeap<lea::kTrimThreshold, Top>>>> {
  using Base = QuickListHeap<lea::kQuickMaxBytes,
                             LeaCoalescingHeap<CoalesceableHeap<lea::kRegionBytes, TrimHeap<lea::kTrimThreshold, Top>>>>;

 public:
  using Base::Base;
};

// Large objects map pages of their own; over an ArenaHeap, they come from its arena, so
// that a simulated Lea heap lives in one address space like every DMM allocator.
template <class Top>
using LeaPageHeap = std::conditional_t<ArenaTopHeap<Top>, Top, MmapHeap>;

template <Heap Top = MmapHeap>
class LeaHeap : public SelectMmapHeap<lea::kMmapThreshold, LeaCoreHeap<Top>, LeaPageHeap<Top>> {
 public:
  using SelectMmapHeap<lea::kMmapThreshold, LeaCoreHeap<Top>, LeaPageHeap<Top>>::SelectMmapHeap;
};

}  // namespace heapkit
