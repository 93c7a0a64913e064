// SegHeap: segregated fits. Freed objects go to one of NumBins little heaps by size
// class; malloc searches its own class first (first fit inside it) and then the next
// non-empty classes, whose objects are all big enough, before asking the big heap.
// Size classes are ranges: class c holds usable sizes in (ClassToMaxSize(c-1),
// ClassToMaxSize(c)]. Sizes above the last class go straight to the big heap.
//
// Bins never refill themselves: a bin's parent returns nullptr, and SegHeap decides
// where to look next. Their cached objects go back to the big heap when it is destroyed.
#pragma once

#include <cstddef>

#include "heapkit/combining/SizeClassBitmap.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t NumBins, std::size_t (*SizeToClass)(std::size_t), std::size_t (*ClassToMaxSize)(std::size_t),
          template <class> class LittleHeap, SizedHeap BigHeap>
class SegHeap : public BigHeap {
 public:
  // The parent of every bin: a miss stays a miss; returned objects go to the big heap.
  class BinParent {
   public:
    static constexpr std::size_t Alignment = BigHeap::Alignment;
    void attachParent(BigHeap* big) { big_ = big; }
    void* malloc(std::size_t) { return nullptr; }
    void free(void* object) { big_->free(object); }
    std::size_t getSize(void* object) const { return big_->getSize(object); }
    WorkCounts& workCounts()
      requires CountingHeap<BigHeap>
    {
      return big_->workCounts();
    }

   private:
    BigHeap* big_ = nullptr;
  };
  using Bin = LittleHeap<BinParent>;
  static_assert(SizedHeap<Bin>, "a SegHeap bin must be a sized heap over its parent");

  template <class... Args>
  explicit SegHeap(Args&&... args) : BigHeap(static_cast<Args&&>(args)...) {
    for (Bin& bin : bins_) bin.attachParent(this);
  }

  void* malloc(std::size_t size) {
    if (void* object = mallocCached(size)) return object;
    return BigHeap::malloc(size);
  }

  // Only from the bins: nullptr when no cached object fits.
  void* mallocCached(std::size_t size) {
    std::size_t sizeClass = SizeToClass(size);
    countStep(*this);  // the class lookup
    if (sizeClass >= NumBins) return nullptr;
    for (std::size_t bin = nonEmpty_.firstAtOrAbove(*this, sizeClass); bin != nonEmpty_.kNone;
         bin = nonEmpty_.firstAtOrAbove(*this, bin + 1)) {
      countStep(*this);  // a bin probed, found through the bitmap
      void* object = bins_[bin].malloc(size);
      // Neighbours may have been unlinked behind the bin's back (coalescing), so the
      // bitmap is a hint: an empty bin found here is cleared.
      if (bins_[bin].empty()) nonEmpty_.clear(*this, bin);
      if (object != nullptr) return object;
    }
    return nullptr;
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t sizeClass = SizeToClass(sizeword::sizeFrom(*this, static_cast<const BigHeap&>(*this), object));
    countStep(*this);  // the class lookup
    if (sizeClass >= NumBins) {
      BigHeap::free(object);
      return;
    }
    bins_[sizeClass].free(object);
    nonEmpty_.set(*this, sizeClass);
  }

 private:
  Bin bins_[NumBins];
  SizeClassBitmap<NumBins> nonEmpty_;
};

}  // namespace heapkit
