// SizeHeap: prepends a 16-byte header that records each object's usable size, so layers
// above can call getSize. The size sits in the word just before the object.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <Heap Super>
class SizeHeap : public Super {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr std::size_t kHeaderBytes = 16;

  using Super::Super;
  SizeHeap() = default;

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, kHeaderBytes, kMinAlignment)) return nullptr;
    std::size_t usable = usableBytesFor(size);
    char* block = static_cast<char*>(Super::malloc(usable + kHeaderBytes));
    if (block == nullptr) return nullptr;
    void* object = block + kHeaderBytes;
    sizeword::set(object, usable);
    countWork(*this, 0, 0, 1);
    return object;
  }

  void free(void* object) {
    if (object != nullptr) Super::free(static_cast<char*>(object) - kHeaderBytes);
  }

  std::size_t getSize(void* object) const { return sizeword::size(object); }
};

}  // namespace heapkit
