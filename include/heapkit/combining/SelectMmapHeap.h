// SelectMmapHeap: large requests (over Threshold bytes) get pages of their own straight
// from the OS and go back to it on free, so they never fragment the small heap.
#pragma once

#include "heapkit/combining/HybridHeap.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

template <std::size_t Threshold, SizeWordHeap SmallHeap>
class SelectMmapHeap : public HybridHeap<Threshold, SmallHeap, MmapHeap> {
 public:
  using HybridHeap<Threshold, SmallHeap, MmapHeap>::HybridHeap;
};

}  // namespace heapkit
