// AdaptiveLeaHeap: Lea's allocator (LeaHeap) with glibc's dynamic mmap and trim
// thresholds, for the malloc replacement libheapkit-lea.so. LeaHeap itself keeps the
// fixed thresholds of dlmalloc 2.7: it is also the DMM simulator's LEA preset, whose
// figures are checked by hand.
//  - the mmap threshold starts at 128 KiB; freeing a mapped block bigger than it (up to
//    32 MiB) raises it to the block's size, so later blocks of that size come from the
//    heap's regions;
//  - the trim threshold (wholly free regions kept before they go back to the OS) follows
//    at twice the mmap threshold plus 512 KiB, so those regions are reused instead of
//    unmapped;
//  - the heap's regions grow with the mmap threshold: each holds any request the heap
//    serves, so a region freed whole serves the next one, and big blocks share regions
//    instead of taking one each (one map, one unmap and a fault a page per block).
//
//   AdaptiveSelectMmapHeap<128 KiB .. 32 MiB,
//     QuickListHeap<128 B,
//       CoalesceHeap<SegHeap<105 classes, AdaptHeap<DLList> per class,
//         CoalesceableHeap<64 KiB regions .. the mmap threshold,
//           AdaptiveThresholdHeap<128 KiB .. 64.5 MiB, Top>>>>>>
#pragma once

#include <cstddef>

#include "heapkit/combining/AdaptiveSelectMmapHeap.h"
#include "heapkit/combining/AdaptiveThresholdHeap.h"
#include "heapkit/general/LeaHeap.h"

namespace heapkit {

namespace lea {
// glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems.
inline constexpr std::size_t kMaxMmapThreshold = 32 * 1024 * 1024;
// Kept beyond glibc's trim threshold (twice the mmap threshold) once it has risen: with
// regions that each hold one block of up to the threshold, 2x kept two of them, and a
// program replacing four buffers of 16-256 KiB in a loop (bench-malloc's buffers) freed a
// region whole and mapped another for a third of its buffers; with 512 KiB more, about
// none (measured: docs/malloc-replacement.md, "Lea"). Fixed, not a multiple: blocks of
// 25 MiB would keep 50 MiB more.
inline constexpr std::size_t kTrimPadBytes = 512 * 1024;
}  // namespace lea

template <Heap Top = MmapHeap>
using AdaptiveLeaCoreHeap = LeaCoreHeap<Top, AdaptiveThresholdHeap>;

template <Heap Top = MmapHeap>
class AdaptiveLeaHeap : public AdaptiveSelectMmapHeap<AdaptiveLeaCoreHeap<Top>, LeaPageHeap<Top>, lea::kMmapThreshold,
                                                      lea::kMaxMmapThreshold, lea::kTrimPadBytes> {
 public:
  using AdaptiveSelectMmapHeap<AdaptiveLeaCoreHeap<Top>, LeaPageHeap<Top>, lea::kMmapThreshold, lea::kMaxMmapThreshold,
                               lea::kTrimPadBytes>::AdaptiveSelectMmapHeap;
};

}  // namespace heapkit
