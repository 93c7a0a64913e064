// HybridHeap: requests up to Threshold bytes go to the small heap, larger ones to the big
// heap. Objects of the big heap are marked with the routing bit of their size word, so
// free sends each object home no matter how much either heap rounded up.
//
// The routing is RoutingHeap's, over a threshold policy: a constant here; glibc's
// threshold, which rises as the program frees big blocks, in AdaptiveSelectMmapHeap. A
// policy is `threshold()`, and may have `bigFreed(size, smallHeap)`, told of every block
// the big heap gets back.
#pragma once

#include <cstddef>
#include <type_traits>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t Bytes>
struct FixedThreshold {
  static constexpr std::size_t threshold() { return Bytes; }
};

template <class ThresholdPolicy, SizeWordHeap SmallHeap, SizeWordHeap BigHeap>
class RoutingHeap : public SmallHeap {
  static_assert(!requires { SmallHeap::RoutesBySizeWord; } && !requires { BigHeap::RoutesBySizeWord; },
                "HybridHeaps do not nest: both would use the same routing bit");

 public:
  static constexpr std::size_t Alignment =
      SmallHeap::Alignment < BigHeap::Alignment ? SmallHeap::Alignment : BigHeap::Alignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr bool RoutesBySizeWord = true;

  RoutingHeap() = default;
  // Both heaps get the arguments when the big heap takes them (two views of one arena,
  // say); otherwise the big heap is default-constructed.
  template <class... Args>
    requires(sizeof...(Args) > 0)
  explicit RoutingHeap(Args&&... args) : SmallHeap(args...), big_(makeBigHeap(args...)) {}

  void* malloc(std::size_t size) {
    countStep(*this);  // the route chosen
    if (size <= threshold_.threshold()) return SmallHeap::malloc(size);
    void* object = big_.malloc(size);
    if (object != nullptr) sizeword::addFlags(*this, object, sizeword::kRoutedToBigHeap);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    countStep(*this);  // the route looked up
    if (!(sizeword::flags(*this, object) & sizeword::kRoutedToBigHeap)) {
      SmallHeap::free(object);
      return;
    }
    sizeword::clearFlags(*this, object, sizeword::kRoutedToBigHeap);
    if constexpr (requires(SmallHeap& small) { threshold_.bigFreed(std::size_t{}, small); }) {
      std::size_t size = big_.getSize(object);
      big_.free(object);
      threshold_.bigFreed(size, static_cast<SmallHeap&>(*this));
    } else {
      big_.free(object);
    }
  }

  // Each heap derives the usable size from its word its own way (boundary tags keep the
  // block length), so ask the one the object came from.
  std::size_t getSize(void* object) const {
    if (sizeword::flags(object) & sizeword::kRoutedToBigHeap) return big_.getSize(object);
    return SmallHeap::getSize(object);
  }

  std::size_t bytesHeld() const
    requires FootprintHeap<SmallHeap> && FootprintHeap<BigHeap>
  {
    return SmallHeap::bytesHeld() + big_.bytesHeld();
  }
  // The two peaks may fall at different times, so their sum bounds the true peak from
  // above; ProfileHeap or a shared top heap gives the exact figure.
  std::size_t peakBytesHeld() const
    requires FootprintHeap<SmallHeap> && FootprintHeap<BigHeap>
  {
    return SmallHeap::peakBytesHeld() + big_.peakBytesHeld();
  }

  BigHeap& bigHeap() { return big_; }

 protected:
  // Requests up to this many bytes go to the small heap.
  std::size_t threshold() const { return threshold_.threshold(); }

 private:
  template <class... Args>
  static BigHeap makeBigHeap(Args&... args) {
    if constexpr (std::is_constructible_v<BigHeap, Args&...>) return BigHeap(args...);
    else return BigHeap();
  }

  BigHeap big_;
  [[no_unique_address]] ThresholdPolicy threshold_;
};

template <std::size_t Threshold, SizeWordHeap SmallHeap, SizeWordHeap BigHeap>
class HybridHeap : public RoutingHeap<FixedThreshold<Threshold>, SmallHeap, BigHeap> {
 public:
  using RoutingHeap<FixedThreshold<Threshold>, SmallHeap, BigHeap>::RoutingHeap;
};

}  // namespace heapkit
