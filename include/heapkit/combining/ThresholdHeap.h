// ThresholdHeap: keeps freed objects for reuse while they total at most MaxCachedBytes
// and gives the rest to its parent. Between a heap and the OS it is a trim threshold:
// memory goes back only when enough of it is idle, so a workload that frees and
// reallocates a region does not pay two system calls each time.
#pragma once

#include <cstddef>

#include "heapkit/building/SLList.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t MaxCachedBytes, SizedHeap Super>
class ThresholdHeap : public Super {
 public:
  using Super::Super;
  ThresholdHeap() = default;

  ~ThresholdHeap() {
    while (void* object = cache_.removeFirst(*this)) Super::free(object);
  }

  void* malloc(std::size_t size) {
    void* object = cache_.removeFirstFit(
        *this, size, [this](void* candidate) { return sizeword::sizeFrom(*this, static_cast<const Super&>(*this), candidate); });
    if (object == nullptr) return Super::malloc(size);
    cachedBytes_ -= sizeword::sizeFrom(*this, static_cast<const Super&>(*this), object);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t size = sizeword::sizeFrom(*this, static_cast<const Super&>(*this), object);
    if (cachedBytes_ + size > MaxCachedBytes) {
      Super::free(object);
      return;
    }
    cachedBytes_ += size;
    cache_.insert(*this, object);
  }

  std::size_t cachedBytes() const { return cachedBytes_; }

 private:
  SLList cache_;
  std::size_t cachedBytes_ = 0;
};

}  // namespace heapkit
