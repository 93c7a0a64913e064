// ParentRef: a layer that forwards to a heap held elsewhere. Segregated heaps use it so
// that all their bins draw on one shared parent instead of each owning a copy.
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <SizedHeap Parent>
class ParentRef {
 public:
  static constexpr std::size_t Alignment = Parent::Alignment;

  ParentRef() = default;
  explicit ParentRef(Parent* parent) : parent_(parent) {}
  void attachParent(Parent* parent) { parent_ = parent; }

  void* malloc(std::size_t size) { return parent_->malloc(size); }
  void free(void* object) { parent_->free(object); }
  std::size_t getSize(void* object) const { return parent_->getSize(object); }

 private:
  Parent* parent_ = nullptr;
};

}  // namespace heapkit
