// ThrowExceptionHeap: turns a failed malloc into std::bad_alloc, for C++ code that
// expects operator new semantics.
#pragma once

#include <new>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <Heap Super>
class ThrowExceptionHeap : public Super {
 public:
  using Super::Super;
  ThrowExceptionHeap() = default;

  void* malloc(std::size_t size) {
    void* object = Super::malloc(size);
    if (object == nullptr) throw std::bad_alloc();
    return object;
  }
};

}  // namespace heapkit
