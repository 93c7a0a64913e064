// AdaptiveSelectMmapHeap: SelectMmapHeap with glibc's dynamic mmap threshold. Requests
// over the threshold (InitialThreshold at first) get pages of their own from PageHeap.
// When such a block is freed and is bigger than the threshold, but at most MaxThreshold,
// the threshold rises to its size and the small heap's trim threshold (an
// AdaptiveThresholdHeap below it, if it has one) to twice that plus TrimPadBytes: a
// program that keeps allocating blocks of that size then gets them from the small heap's
// freed memory instead of paying an mmap, page faults and a munmap for each (glibc's
// malloc.c, "dynamic mmap threshold"). The small heap's regions grow too, if it has them
// (CoalesceableHeap::growRegionsFor): each then holds any request under the threshold,
// so a region freed whole serves the next one. The threshold never falls, as in glibc.
// The routing is HybridHeap's (RoutingHeap); only the threshold policy differs.
#pragma once

#include <cstddef>

#include "heapkit/combining/HybridHeap.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

template <std::size_t InitialThreshold, std::size_t MaxThreshold, std::size_t TrimPadBytes = 0>
class GlibcMmapThreshold {
  static_assert(InitialThreshold <= MaxThreshold);

 public:
  std::size_t threshold() const { return threshold_; }

  template <class SmallHeap>
  void bigFreed(std::size_t size, SmallHeap& small) {
    if (size <= threshold_ || size > MaxThreshold) return;
    threshold_ = size;
    if constexpr (requires { small.setTrimThreshold(size); }) small.setTrimThreshold(2 * size + TrimPadBytes);
    if constexpr (requires { small.growRegionsFor(size); }) small.growRegionsFor(size);
  }

 private:
  std::size_t threshold_ = InitialThreshold;
};

template <SizeWordHeap SmallHeap, SizeWordHeap PageHeap = MmapHeap, std::size_t InitialThreshold = 128 * 1024,
          std::size_t MaxThreshold = 32 * 1024 * 1024, std::size_t TrimPadBytes = 0>
class AdaptiveSelectMmapHeap
    : public RoutingHeap<GlibcMmapThreshold<InitialThreshold, MaxThreshold, TrimPadBytes>, SmallHeap, PageHeap> {
  using Base = RoutingHeap<GlibcMmapThreshold<InitialThreshold, MaxThreshold, TrimPadBytes>, SmallHeap, PageHeap>;

 public:
  using Base::Base;

  // Requests up to this many bytes go to the small heap.
  std::size_t mmapThreshold() const { return Base::threshold(); }
};

}  // namespace heapkit
