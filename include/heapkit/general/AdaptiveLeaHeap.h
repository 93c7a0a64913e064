// AdaptiveLeaHeap: Lea's allocator (LeaHeap) with glibc's dynamic mmap and trim
// thresholds, for the malloc replacement libheapkit-lea.so. LeaHeap itself keeps the
// fixed thresholds of dlmalloc 2.7: it is also the DMM simulator's LEA preset, whose
// figures are checked by hand.
//  - the mmap threshold starts at 128 KiB; freeing a mapped block bigger than it (up to
//    32 MiB) raises it to the block's size, so later blocks of that size come from the
//    heap's regions;
//  - the trim threshold (wholly free regions kept before they go back to the OS) follows
//    at twice the mmap threshold, so those regions are reused instead of unmapped.
//
//   AdaptiveSelectMmapHeap<128 KiB .. 32 MiB,
//     QuickListHeap<128 B,
//       CoalesceHeap<SegHeap<105 classes, AdaptHeap<DLList> per class,
//         CoalesceableHeap<64 KiB regions, AdaptiveThresholdHeap<128 KiB .. 64 MiB, Top>>>>>>
#pragma once

#include <cstddef>

#include "heapkit/combining/AdaptiveSelectMmapHeap.h"
#include "heapkit/combining/AdaptiveThresholdHeap.h"
#include "heapkit/general/LeaHeap.h"

namespace heapkit {

namespace lea {
// glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems.
inline constexpr std::size_t kMaxMmapThreshold = 32 * 1024 * 1024;
}  // namespace lea

template <Heap Top = MmapHeap>
using AdaptiveLeaCoreHeap = LeaCoreHeap<Top, AdaptiveThresholdHeap>;

template <Heap Top = MmapHeap>
class AdaptiveLeaHeap
    : public AdaptiveSelectMmapHeap<AdaptiveLeaCoreHeap<Top>, LeaPageHeap<Top>, lea::kMmapThreshold, lea::kMaxMmapThreshold> {
 public:
  using AdaptiveSelectMmapHeap<AdaptiveLeaCoreHeap<Top>, LeaPageHeap<Top>, lea::kMmapThreshold,
                               lea::kMaxMmapThreshold>::AdaptiveSelectMmapHeap;
};

}  // namespace heapkit
