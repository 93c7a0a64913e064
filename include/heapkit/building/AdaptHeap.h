// AdaptHeap: turns a dictionary of free objects (SLList, DLList) into a heap layer: freed
// objects go into the dictionary, and malloc takes the first one big enough before
// asking the parent.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <class Dictionary, SizedHeap Super>
class AdaptHeap : public Super {
 public:
  using Super::Super;
  AdaptHeap() = default;

  ~AdaptHeap() {
    while (void* object = dictionary_.removeFirst()) Super::free(object);
  }

  void* malloc(std::size_t size) {
    void* object = dictionary_.removeFirstFit(size, [this](void* candidate) {
      countWork(*this, 1, 2, 0);  // a node visited: its size word and its link
      return Super::getSize(candidate);
    });
    if (object != nullptr) countWork(*this, 0, Dictionary::kUnlinkReads, Dictionary::kUnlinkWrites);
    return object != nullptr ? object : Super::malloc(size);
  }

  void free(void* object) {
    if (object == nullptr) return;
    dictionary_.insert(object);
    countWork(*this, 1, Dictionary::kInsertReads, Dictionary::kInsertWrites);
  }

  bool empty() const { return dictionary_.empty(); }

 private:
  Dictionary dictionary_;
};

}  // namespace heapkit
