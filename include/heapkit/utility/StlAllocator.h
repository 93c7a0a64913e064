// StlAllocator: a standard allocator over any heapkit composition, so std::vector,
// std::map and friends can live on it. It refers to a heap the caller owns; copies
// (and rebinds) share that heap and compare equal.
#pragma once

#include <cstddef>
#include <new>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <class T, Heap H>
class StlAllocator {
 public:
  using value_type = T;
  static_assert(alignof(T) <= H::Alignment, "the heap cannot align objects of this type");

  explicit StlAllocator(H& heap) noexcept : heap_(&heap) {}
  template <class U>
  StlAllocator(const StlAllocator<U, H>& other) noexcept : heap_(other.heap()) {}

  T* allocate(std::size_t count) {
    if (count > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    void* object = heap_->malloc(count * sizeof(T));
    if (object == nullptr) throw std::bad_alloc();
    return static_cast<T*>(object);
  }
  void deallocate(T* object, std::size_t) noexcept { heap_->free(object); }

  H* heap() const noexcept { return heap_; }

  template <class U>
  bool operator==(const StlAllocator<U, H>& other) const noexcept {
    return heap_ == other.heap();
  }

 private:
  H* heap_;
};

}  // namespace heapkit
