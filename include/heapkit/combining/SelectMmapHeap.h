// SelectMmapHeap: large requests (over Threshold bytes) get pages of their own straight
// from the OS (or from PageHeap: an ArenaHeap in the DMM simulator) and go back to it on
// free, so they never fragment the small heap.
#pragma once

#include "heapkit/combining/HybridHeap.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

template <std::size_t Threshold, SizeWordHeap SmallHeap, SizeWordHeap PageHeap = MmapHeap>
class SelectMmapHeap : public HybridHeap<Threshold, SmallHeap, PageHeap> {
 public:
  using HybridHeap<Threshold, SmallHeap, PageHeap>::HybridHeap;
};

}  // namespace heapkit
