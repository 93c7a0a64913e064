// AdaptiveLeaHeap: Lea's allocator (LeaHeap) with glibc's dynamic mmap and trim
// thresholds, for the malloc replacement libheapkit-lea.so. LeaHeap itself keeps the
// fixed thresholds of dlmalloc 2.7: it is also the DMM simulator's LEA preset, whose
// figures are checked by hand.
//  - the mmap threshold starts at 128 KiB; freeing a mapped block bigger than it (up to
//    32 MiB) raises it to the block's size, so later blocks of that size come from the
//    heap's regions;
//  - the trim threshold (wholly free regions kept before they go back to the OS) follows
//    at twice the mmap threshold plus 512 KiB, so those regions are reused instead of
//    unmapped; beyond it, regions are kept as long as the program used that many bytes
//    recently (trimming with hysteresis, lea::TrimHeap);
//  - the heap's regions grow with the mmap threshold: each holds any request the heap
//    serves, so a region freed whole serves the next one, and big blocks share regions
//    instead of taking one each (one map, one unmap and a fault a page per block).
//
//   AdaptiveSelectMmapHeap<128 KiB .. 32 MiB,
//     QuickListHeap<128 B,
//       CoalesceHeap<SegHeap<105 classes, AdaptHeap<DLList> per class,
//         CoalesceableHeap<64 KiB regions .. the mmap threshold,
//           AdaptiveThresholdHeap<128 KiB .. 64.5 MiB, recent peak, Top>>>>>>
#pragma once

#include <cstddef>
#include <cstdint>

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
// Trimming with hysteresis (AdaptiveThresholdHeap): wholly free regions are also kept up
// to the bytes in regions the program used at its peak over the last 2048-4096 region
// mallocs and frees, at most 256 trim thresholds (32 MiB at first). prodcons (records of
// 32 KiB and 4096 objects of 64 B filled, queued and freed, some 5 regions a record, the
// queue swinging by tens of records) freed the regions of the records consumed beyond the
// trim threshold and mapped them again for the next ones: 37,000 memory system calls and
// 315,000 page faults for 4,000 records; 2,300 and 38,000 with it. A window of 256
// operations left 25,000 calls, of 1024 9,000: the swings span hundreds of regions.
inline constexpr std::uint64_t kTrimPeakWindowOperations = 2048;
inline constexpr std::size_t kTrimPeakKeepFactor = 256;

template <std::size_t InitialMaxCachedBytes, class Super>
using TrimHeap = AdaptiveThresholdHeap<InitialMaxCachedBytes, Super, kTrimPeakWindowOperations, kTrimPeakKeepFactor>;
}  // namespace lea

template <Heap Top = MmapHeap>
using AdaptiveLeaCoreHeap = LeaCoreHeap<Top, lea::TrimHeap>;

template <Heap Top = MmapHeap>
class AdaptiveLeaHeap : public AdaptiveSelectMmapHeap<AdaptiveLeaCoreHeap<Top>, LeaPageHeap<Top>, lea::kMmapThreshold,
                                                      lea::kMaxMmapThreshold, lea::kTrimPadBytes> {
 public:
  using AdaptiveSelectMmapHeap<AdaptiveLeaCoreHeap<Top>, LeaPageHeap<Top>, lea::kMmapThreshold, lea::kMaxMmapThreshold,
                               lea::kTrimPadBytes>::AdaptiveSelectMmapHeap;
};

}  // namespace heapkit
