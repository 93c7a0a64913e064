// AdaptHeap: turns a dictionary of free objects (SLList, DLList) into a heap layer: freed
// objects go into the dictionary, and malloc takes the first one big enough before
// asking the parent.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <class Dictionary, SizedHeap Super>
class AdaptHeap : public Super {
 public:
  using Super::Super;
  AdaptHeap() = default;

  ~AdaptHeap() {
    while (void* object = dictionary_.removeFirst(*this)) Super::free(object);
  }

  // The dictionary counts its own accesses and steps (it is given this heap), and each
  // candidate's size word is counted as it is read.
  void* malloc(std::size_t size) {
    void* object = dictionary_.removeFirstFit(
        *this, size, [this](void* candidate) { return sizeword::sizeFrom(*this, static_cast<const Super&>(*this), candidate); });
    return object != nullptr ? object : Super::malloc(size);
  }

  void free(void* object) {
    if (object == nullptr) return;
    dictionary_.insert(*this, object);
  }

  bool empty() { return dictionary_.empty(*this); }

 private:
  Dictionary dictionary_;
};

}  // namespace heapkit
