// ThreadHeap: spreads threads over NumHeaps copies of a thread-safe heap (usually a
// LockedHeap), so threads rarely contend for one lock. As in Heap Layers, an object goes
// back to the heap of the thread that frees it, so PerThreadHeap must accept objects its
// siblings allocated, up to and including teardown: free lists over one shared,
// thread-safe parent that outlives them. Separate chunked or coalescing heaps do not
// qualify (one heap's destructor would free chunks a sibling's free list still threads
// through): use PHOThreadHeap for those.
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"
#include "heapkit/threads/HeapArray.h"
#include "heapkit/threads/Locks.h"

namespace heapkit {

template <std::size_t NumHeaps, Heap PerThreadHeap>
class ThreadHeap : public HeapArray<NumHeaps, PerThreadHeap> {
  using HeapArray<NumHeaps, PerThreadHeap>::heaps_;

 public:
  static constexpr std::size_t Alignment = PerThreadHeap::Alignment;

  void* malloc(std::size_t size) { return mine().malloc(size); }
  void free(void* object) {
    if (object != nullptr) mine().free(object);
  }
  std::size_t getSize(void* object)
    requires SizedHeap<PerThreadHeap>
  {
    return mine().getSize(object);
  }

  PerThreadHeap& heapOfThisThread() { return mine(); }

 private:
  PerThreadHeap& mine() { return heaps_[threadIndex() % NumHeaps]; }
};

}  // namespace heapkit
