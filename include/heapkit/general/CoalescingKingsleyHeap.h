// CoalescingKingsleyHeap: Kingsley's power-of-two bins, but objects are cut to the size
// asked for and freed neighbours merge, so memory is reused across size classes. A
// wholly free region goes back to the parent.
//
//   CoalesceHeap<SegHeap<29 power-of-two classes, AdaptHeap<DLList> per class,
//                        CoalesceableHeap<64 KiB regions, Top>>>
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/building/AdaptHeap.h"
#include "heapkit/building/CoalesceHeap.h"
#include "heapkit/building/DLList.h"
#include "heapkit/combining/SegHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/objectrep/CoalesceableHeap.h"

namespace heapkit {

namespace kingsley {
// Coalescing can build blocks of any size, so the last class takes everything above.
constexpr std::size_t sizeToClassUnbounded(std::size_t size) {
  std::size_t sizeClass = sizeToClass(size);
  return sizeClass < kNumBins ? sizeClass : kNumBins - 1;
}
constexpr std::size_t classToMaxSizeUnbounded(std::size_t sizeClass) {
  return sizeClass + 1 < kNumBins ? classToSize(sizeClass) : SIZE_MAX;
}
using UnboundedClasses = FunctionBins<kNumBins, sizeToClassUnbounded, classToMaxSizeUnbounded>;
template <class Parent>
using DLListBin = AdaptHeap<DLList, Parent>;
}  // namespace kingsley

template <Heap Top = MmapHeap>
class CoalescingKingsleyHeap
    : public CoalesceHeap<
          SegHeap<kingsley::UnboundedClasses, kingsley::DLListBin, CoalesceableHeap<kingsley::kChunkBytes, Top>>> {
  using Base =
      CoalesceHeap<SegHeap<kingsley::UnboundedClasses, kingsley::DLListBin, CoalesceableHeap<kingsley::kChunkBytes, Top>>>;

 public:
  using Base::Base;
};

}  // namespace heapkit
