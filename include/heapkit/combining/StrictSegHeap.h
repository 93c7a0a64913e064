// StrictSegHeap: strict segregated fits. Every request is rounded up to its size class
// and served by that class's little heap, which refills from the big heap; a freed
// object goes back to the class it can fully serve. Nothing is split or merged.
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"
#include "heapkit/utility/ParentRef.h"

namespace heapkit {

template <std::size_t NumBins, std::size_t (*SizeToClass)(std::size_t), std::size_t (*ClassToSize)(std::size_t),
          template <class> class LittleHeap, SizedHeap BigHeap>
class StrictSegHeap : public BigHeap {
 public:
  using Bin = LittleHeap<ParentRef<BigHeap>>;
  static_assert(Heap<Bin>, "a StrictSegHeap bin must be a heap over its parent");

  template <class... Args>
  explicit StrictSegHeap(Args&&... args) : BigHeap(static_cast<Args&&>(args)...) {
    for (Bin& bin : bins_) bin.attachParent(this);
  }

  void* malloc(std::size_t size) {
    std::size_t sizeClass = SizeToClass(size);
    if (sizeClass >= NumBins) return BigHeap::malloc(size);
    return bins_[sizeClass].malloc(ClassToSize(sizeClass));
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t size = BigHeap::getSize(object);
    std::size_t sizeClass = SizeToClass(size);
    // An object bigger than asked for belongs to the largest class it can fully serve.
    if (sizeClass < NumBins && ClassToSize(sizeClass) > size) {
      if (sizeClass == 0) {
        BigHeap::free(object);
        return;
      }
      --sizeClass;
    }
    if (sizeClass >= NumBins) BigHeap::free(object);
    else bins_[sizeClass].free(object);
  }

 private:
  Bin bins_[NumBins];
};

}  // namespace heapkit
