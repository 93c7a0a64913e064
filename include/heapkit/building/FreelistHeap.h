// FreelistHeap: caches every freed object on a LIFO list and hands it out again; the
// fastest possible reuse, meant for objects of one size (a size class, a node type).
#pragma once

#include "heapkit/building/BoundedFreelistHeap.h"

namespace heapkit {

template <Heap Super>
class FreelistHeap : public BoundedFreelistHeap<kUnbounded, Super> {
 public:
  using BoundedFreelistHeap<kUnbounded, Super>::BoundedFreelistHeap;
};

}  // namespace heapkit
