// HeapMemoryResource: a std::pmr::memory_resource that owns a heapkit composition, so
// pmr containers (std::pmr::vector, std::pmr::string, ...) can live on it. Alignments
// above what the heap guarantees are served by over-allocating.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <new>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <Heap H>
class HeapMemoryResource : public std::pmr::memory_resource {
 public:
  template <class... Args>
  explicit HeapMemoryResource(Args&&... args) : heap_(static_cast<Args&&>(args)...) {}

  H& heap() { return heap_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment <= H::Alignment) {
      void* object = heap_.malloc(bytes);
      if (object == nullptr) throw std::bad_alloc();
      return object;
    }
    // Room to align and to keep the original pointer just below the aligned one.
    if (bytes > SIZE_MAX - alignment - sizeof(void*)) throw std::bad_alloc();
    void* raw = heap_.malloc(bytes + alignment + sizeof(void*));
    if (raw == nullptr) throw std::bad_alloc();
    auto aligned = alignUp(reinterpret_cast<std::uintptr_t>(raw) + sizeof(void*), alignment);
    reinterpret_cast<void**>(aligned)[-1] = raw;
    return reinterpret_cast<void*>(aligned);
  }

  void do_deallocate(void* object, std::size_t, std::size_t alignment) override {
    if (alignment <= H::Alignment) heap_.free(object);
    else heap_.free(static_cast<void**>(object)[-1]);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  H heap_;
};

}  // namespace heapkit
