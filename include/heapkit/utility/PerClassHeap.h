// PerClassHeap: derive a class from PerClassHeap<H> and its operator new/delete use the
// program-wide instance of H (through UniqueHeap) instead of the global allocator, e.g.
//   struct Node : heapkit::PerClassHeap<heapkit::FreelistHeap<heapkit::MallocHeap>> { ... };
#pragma once

#include <new>

#include "heapkit/utility/UniqueHeap.h"

namespace heapkit {

template <Heap H>
class PerClassHeap {
 public:
  static void* operator new(std::size_t size) {
    static_assert(H::Alignment >= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    void* object = UniqueHeap<H>::instance().malloc(size);
    if (object == nullptr) throw std::bad_alloc();
    return object;
  }
  static void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
    return UniqueHeap<H>::instance().malloc(size);
  }
  static void operator delete(void* object) noexcept { UniqueHeap<H>::instance().free(object); }
  static void operator delete(void* object, const std::nothrow_t&) noexcept { UniqueHeap<H>::instance().free(object); }
};

}  // namespace heapkit
