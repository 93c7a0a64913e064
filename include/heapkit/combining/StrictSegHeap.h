// StrictSegHeap: strict segregated fits. Every request is rounded up to its size class
// (a bin policy, combining/Bins.h, by type or by value: class c serves sizes up to
// Bins::boundOf(c); larger sizes, and an open last bin's, go to the big heap) and
// served by that class's little heap, or, when the little heap has nothing cached,
// by the big heap; a freed object goes back to the class it can fully serve. Nothing is
// split or merged.
//
// Each bin is a LittleHeap over a BinParent with no state, so a bin is only what the
// little heap keeps (one word, the head, for a free list) and the hot path reaches bin c
// with one scaled address, as a hand-written array of list heads does. A bin's miss
// stays a miss (StrictSegHeap refills from the big heap itself, with no pointer to
// load); for sizes and for objects a bin hands back (a bounded bin that is full, a bin
// being destroyed), the bin finds the big heap through a parent pointer kept in a
// parallel array at a fixed distance before it, off the hot path.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "heapkit/combining/Bins.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <BinPolicy Bins, template <class> class LittleHeap, SizedHeap BigHeap>
class StrictSegHeap : public BigHeap {
  static constexpr std::size_t NumBins = Bins::kMaxBins;
  struct BinSlots;

 public:
  // The parent of every bin: a miss stays a miss; sizes and returned objects go to the
  // big heap, found through the bin's parent slot.
  class BinParent {
   public:
    static constexpr std::size_t Alignment = BigHeap::Alignment;
    // Bins check what the big heap's top asks for (core/Hardening.h).
    static constexpr bool HardenedAgainstMisuse = hardened<BigHeap>();
    // Strict classes: free puts an object in the largest class it serves whole, and a bin
    // is asked for its class's size only, so its list needs no size test on malloc.
    static constexpr bool ListedObjectsFit = true;

    void* malloc(std::size_t) { return nullptr; }
    void free(void* object) { bigHeap().free(object); }
    // Hardened over a big heap that keeps a freed mark in its header (SizeHeap's cookie):
    // a bin marks its listed objects there instead of tagging them, because
    // StrictSegHeap's free asks getSize, which checks the mark, before the bin's free, and
    // no bin asks getSize of a listed object (ListedObjectsFit).
    static void markFreed(void* object)
      requires requires { BigHeap::markFreed(object); }
    {
      BigHeap::markFreed(object);
    }
    static void markAllocated(void* object)
      requires requires { BigHeap::markAllocated(object); }
    {
      BigHeap::markAllocated(object);
    }
    std::size_t getSize(void* object) const { return bigHeap().getSize(object); }
    WorkCounts& workCounts()
      requires CountingHeap<BigHeap>
    {
      return bigHeap().workCounts();
    }

   private:
    BigHeap& bigHeap() const { return *BinSlots::parentOf(static_cast<const Bin*>(this)); }
  };
  using Bin = LittleHeap<BinParent>;
  static_assert(Heap<Bin>, "a StrictSegHeap bin must be a heap over its parent");

  // Bins by type take no argument; bins by value come first.
  template <class... Args>
    requires(!startsWithBins<Bins, Args...>)
  explicit StrictSegHeap(Args&&... args) : BigHeap(static_cast<Args&&>(args)...) {
    for (ParentSlot& slot : slots_.parents) slot.parent = this;
  }
  template <class... Args>
  explicit StrictSegHeap(const Bins& sizeBins, Args&&... args)
      : BigHeap(static_cast<Args&&>(args)...), sizeBins_(sizeBins), binCount_(strictBins(sizeBins)) {
    for (ParentSlot& slot : slots_.parents) slot.parent = this;
  }

  void* malloc(std::size_t size) {
    std::size_t sizeClass = sizeBins_.binOf(size);
    countStep(*this);  // the class lookup
    if (sizeClass >= binCount()) return BigHeap::malloc(size);
    std::size_t classSize = sizeBins_.boundOf(sizeClass);
    if (void* object = slots_.bins[sizeClass].malloc(classSize)) return object;
    return BigHeap::malloc(classSize);
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t size = sizeword::sizeFrom(*this, static_cast<const BigHeap&>(*this), object);
    std::size_t sizeClass = sizeBins_.binOf(size);
    countStep(*this);  // the class lookup
    // An object bigger than asked for belongs to the largest class it can fully serve.
    if (sizeClass < binCount() && sizeBins_.boundOf(sizeClass) > size) {
      if (sizeClass == 0) {
        BigHeap::free(object);
        return;
      }
      --sizeClass;
    }
    if (sizeClass >= binCount()) BigHeap::free(object);
    else slots_.bins[sizeClass].free(object);
  }

 private:
  // The classes served: a table by value may hold more bins than the arrays (exact bins up
  // to a large size) or end in an open bin (bound SIZE_MAX), which no class size can
  // serve; their sizes go to the big heap.
  static std::size_t strictBins(const Bins& bins) {
    std::size_t count = std::min(bins.count(), NumBins);
    while (count > 0 && bins.boundOf(count - 1) == SIZE_MAX) --count;
    return count;
  }
  std::size_t binCount() const {
    if constexpr (BinsByType<Bins>) return Bins::count();
    else return binCount_;
  }

  // A parent pointer padded to a bin's size, so that parents[c] lies the same distance
  // (the size of the bins array) after bins[c] for every c.
  union alignas(alignof(Bin) > alignof(BigHeap*) ? alignof(Bin) : alignof(BigHeap*)) ParentSlot {
    BigHeap* parent;
    unsigned char binStride[sizeof(Bin)];
  };
  static_assert(sizeof(ParentSlot) == sizeof(Bin), "a bin must be at least a pointer, in whole pointers");

  // bins[c]'s parent is parents[c].parent. The parents come first, so they outlive the
  // bins, whose destructors hand cached objects back through them.
  struct BinSlots {
    ParentSlot parents[NumBins];
    Bin bins[NumBins];

    static BigHeap* parentOf(const Bin* bin) {
      auto* slot = reinterpret_cast<const ParentSlot*>(reinterpret_cast<const unsigned char*>(bin) - sizeof(Bin) * NumBins);
      return slot->parent;
    }
  };

  BinSlots slots_;
  [[no_unique_address]] Bins sizeBins_;
  std::size_t binCount_ = NumBins;
};

}  // namespace heapkit
