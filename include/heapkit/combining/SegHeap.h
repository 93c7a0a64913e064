// SegHeap: segregated fits. Freed objects go to one of the little heaps by size class
// (a bin policy, combining/Bins.h, by type or by value); malloc searches its own class
// first (first fit inside it) and then the next non-empty classes, whose objects are all
// big enough, before asking the big heap. Class c holds usable sizes in
// (Bins::boundOf(c-1), Bins::boundOf(c)]. Sizes above the last class go straight to the
// big heap.
//
// Bins never refill themselves: a bin's parent returns nullptr, and SegHeap decides
// where to look next. Their cached objects go back to the big heap when it is destroyed.
#pragma once

#include <algorithm>
#include <cstddef>

#include "heapkit/combining/Bins.h"
#include "heapkit/combining/SizeClassBitmap.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <BinPolicy Bins, template <class> class LittleHeap, SizedHeap BigHeap>
class SegHeap : public BigHeap {
  static constexpr std::size_t NumBins = Bins::kMaxBins;

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

  // Bins by type take no argument; bins by value come first.
  template <class... Args>
    requires(!startsWithBins<Bins, Args...>)
  explicit SegHeap(Args&&... args) : BigHeap(static_cast<Args&&>(args)...) {
    for (Bin& bin : bins_) bin.attachParent(this);
  }
  template <class... Args>
  explicit SegHeap(const Bins& sizeBins, Args&&... args)
      : BigHeap(static_cast<Args&&>(args)...), sizeBins_(sizeBins), binCount_(std::min(sizeBins.count(), NumBins)) {
    for (Bin& bin : bins_) bin.attachParent(this);
  }

  void* malloc(std::size_t size) {
    if (void* object = mallocCached(size)) return object;
    return BigHeap::malloc(size);
  }

  // Only from the bins: nullptr when no cached object fits.
  void* mallocCached(std::size_t size) {
    std::size_t sizeClass = sizeBins_.binOf(size);
    countStep(*this);  // the class lookup
    if (sizeClass >= binCount()) return nullptr;
    for (std::size_t bin = firstNonEmpty(sizeClass); bin != nonEmpty_.kNone; bin = firstNonEmpty(bin + 1)) {
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
    std::size_t sizeClass = sizeBins_.binOf(sizeword::sizeFrom(*this, static_cast<const BigHeap&>(*this), object));
    countStep(*this);  // the class lookup
    if (sizeClass >= binCount()) {
      BigHeap::free(object);
      return;
    }
    bins_[sizeClass].free(object);
    nonEmpty_.set(*this, sizeClass);
  }

 private:
  // Bins by type use every one of their NumBins (the shipped heaps' search, unchanged);
  // bins by value may use fewer.
  std::size_t firstNonEmpty(std::size_t bin) {
    if constexpr (BinsByType<Bins>) return nonEmpty_.firstAtOrAbove(*this, bin);
    else return nonEmpty_.firstAtOrAbove(*this, bin, binCount_);
  }
  // The bins the arrays hold: a table by value with more (exact bins up to a large size)
  // sends the sizes of the others to the big heap.
  std::size_t binCount() const {
    if constexpr (BinsByType<Bins>) return Bins::count();
    else return binCount_;
  }

  Bin bins_[NumBins];
  SizeClassBitmap<NumBins> nonEmpty_;
  [[no_unique_address]] Bins sizeBins_;
  std::size_t binCount_ = NumBins;
};

}  // namespace heapkit
