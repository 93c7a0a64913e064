// AdaptiveSelectMmapHeap: SelectMmapHeap with glibc's dynamic mmap threshold. Requests
// over the threshold (InitialThreshold at first) get pages of their own from PageHeap.
// When such a block is freed and is bigger than the threshold, but at most MaxThreshold,
// the threshold rises to its size and the small heap's trim threshold (an
// AdaptiveThresholdHeap below it, if it has one) to twice that: a program that keeps
// allocating blocks of that size then gets them from the small heap's freed memory
// instead of paying an mmap, page faults and a munmap for each (glibc's malloc.c,
// "dynamic mmap threshold"). The threshold never falls, as in glibc.
#pragma once

#include <cstddef>
#include <type_traits>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

template <SizeWordHeap SmallHeap, SizeWordHeap PageHeap = MmapHeap, std::size_t InitialThreshold = 128 * 1024,
          std::size_t MaxThreshold = 32 * 1024 * 1024>
class AdaptiveSelectMmapHeap : public SmallHeap {
  static_assert(!requires { SmallHeap::RoutesBySizeWord; } && !requires { PageHeap::RoutesBySizeWord; },
                "routing layers do not nest: both would use the same routing bit");
  static_assert(InitialThreshold <= MaxThreshold);

 public:
  static constexpr std::size_t Alignment =
      SmallHeap::Alignment < PageHeap::Alignment ? SmallHeap::Alignment : PageHeap::Alignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr bool RoutesBySizeWord = true;

  AdaptiveSelectMmapHeap() = default;
  // Both heaps get the arguments when the page heap takes them (two views of one arena);
  // otherwise the page heap is default-constructed.
  template <class... Args>
    requires(sizeof...(Args) > 0)
  explicit AdaptiveSelectMmapHeap(Args&&... args) : SmallHeap(args...), pages_(makePageHeap(args...)) {}

  void* malloc(std::size_t size) {
    countWork(*this, 1);
    if (size <= mmapThreshold_) return SmallHeap::malloc(size);
    void* object = pages_.malloc(size);
    if (object != nullptr) sizeword::addFlags(object, sizeword::kRoutedToBigHeap);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    countWork(*this, 1, 1, 0);
    if (!(sizeword::flags(object) & sizeword::kRoutedToBigHeap)) {
      SmallHeap::free(object);
      return;
    }
    sizeword::clearFlags(object, sizeword::kRoutedToBigHeap);
    std::size_t size = pages_.getSize(object);
    pages_.free(object);
    if (size > mmapThreshold_ && size <= MaxThreshold) {
      mmapThreshold_ = size;
      if constexpr (requires(SmallHeap& heap) { heap.setTrimThreshold(size); }) SmallHeap::setTrimThreshold(2 * size);
    }
  }

  std::size_t getSize(void* object) const {
    if (sizeword::flags(object) & sizeword::kRoutedToBigHeap) return pages_.getSize(object);
    return SmallHeap::getSize(object);
  }

  // Requests up to this many bytes go to the small heap.
  std::size_t mmapThreshold() const { return mmapThreshold_; }

  std::size_t bytesHeld() const
    requires FootprintHeap<SmallHeap> && FootprintHeap<PageHeap>
  {
    return SmallHeap::bytesHeld() + pages_.bytesHeld();
  }
  // The two peaks may fall at different times: their sum bounds the true peak from above.
  std::size_t peakBytesHeld() const
    requires FootprintHeap<SmallHeap> && FootprintHeap<PageHeap>
  {
    return SmallHeap::peakBytesHeld() + pages_.peakBytesHeld();
  }

  PageHeap& bigHeap() { return pages_; }

 private:
  template <class... Args>
  static PageHeap makePageHeap(Args&... args) {
    if constexpr (std::is_constructible_v<PageHeap, Args&...>) return PageHeap(args...);
    else return PageHeap();
  }

  PageHeap pages_;
  std::size_t mmapThreshold_ = InitialThreshold;
};

}  // namespace heapkit
