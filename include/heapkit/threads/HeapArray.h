// HeapArray: NumHeaps copies of a heap, the storage that ThreadHeap and PHOThreadHeap
// spread threads over. It sums their footprints and passes the fork hooks to each; which
// copy serves a call is the deriving layer's choice.
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"
#include "heapkit/threads/Locks.h"

namespace heapkit {

template <std::size_t NumHeaps, Heap PerThreadHeap>
class HeapArray {
  static_assert(NumHeaps > 0);

 public:
  std::size_t bytesHeld() const
    requires FootprintHeap<PerThreadHeap>
  {
    std::size_t total = 0;
    for (const PerThreadHeap& heap : heaps_) total += heap.bytesHeld();
    return total;
  }
  // Peaks of different heaps fall at different times: the sum bounds the true peak.
  std::size_t peakBytesHeld() const
    requires FootprintHeap<PerThreadHeap>
  {
    std::size_t total = 0;
    for (const PerThreadHeap& heap : heaps_) total += heap.peakBytesHeld();
    return total;
  }

  void prepareFork() {
    for (PerThreadHeap& heap : heaps_) forkhooks::prepare(heap);
  }
  void parentAfterFork() {
    for (PerThreadHeap& heap : heaps_) forkhooks::parent(heap);
  }
  void childAfterFork() {
    for (PerThreadHeap& heap : heaps_) forkhooks::child(heap);
  }

  PerThreadHeap& heap(std::size_t index) { return heaps_[index]; }

 protected:
  PerThreadHeap heaps_[NumHeaps];
};

}  // namespace heapkit
