// UniqueHeap: every UniqueHeap<H> in the program shares one instance of H, created on
// first use. Its purpose is global state, so that objects allocated in one place can be
// freed in another without passing a heap around. Not thread-safe by itself: put a
// locking layer in H when threads share it.
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <Heap H>
class UniqueHeap {
 public:
  static constexpr std::size_t Alignment = H::Alignment;

  static H& instance() {
    static H heap;
    return heap;
  }

  void* malloc(std::size_t size) { return instance().malloc(size); }
  void free(void* object) { instance().free(object); }
  std::size_t getSize(void* object) const
    requires SizedHeap<H>
  {
    return instance().getSize(object);
  }
};

}  // namespace heapkit
