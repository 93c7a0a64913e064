// A bitmap of non-empty bins, so a segregated heap finds the next bin worth searching
// with a count-trailing-zeros instead of a walk over empty ones.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "heapkit/core/Counting.h"

namespace heapkit {

template <std::size_t NumBins>
class SizeClassBitmap {
 public:
  static constexpr std::size_t kNone = NumBins;

  // Each word is metadata of the heap that owns the bitmap, read and written through it
  // (core/Counting.h).
  template <class H>
  void set(H& heap, std::size_t bin) {
    std::uint64_t& word = words_[bin / 64];
    storeMetadata(heap, word, loadMetadata(heap, word) | std::uint64_t{1} << (bin % 64));
  }
  template <class H>
  void clear(H& heap, std::size_t bin) {
    std::uint64_t& word = words_[bin / 64];
    storeMetadata(heap, word, loadMetadata(heap, word) & ~(std::uint64_t{1} << (bin % 64)));
  }

  // The first marked bin >= bin, or kNone. One step for each further word scanned.
  template <class H>
  std::size_t firstAtOrAbove(H& heap, std::size_t bin) const {
    return firstAtOrAbove(heap, bin, NumBins);
  }
  // The same among the first `count` bins only (bins set by value may use fewer than
  // NumBins: the words past them are not scanned, so they cost no step).
  template <class H>
  std::size_t firstAtOrAbove(H& heap, std::size_t bin, std::size_t count) const {
    if (bin >= count) return kNone;
    std::size_t word = bin / 64, words = (count + 63) / 64;
    std::uint64_t bits = loadMetadata(heap, words_[word]) & (~std::uint64_t{0} << (bin % 64));
    while (bits == 0) {
      if (++word == words) return kNone;
      countStep(heap);
      bits = loadMetadata(heap, words_[word]);
    }
    return word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
  }

 private:
  static constexpr std::size_t kWords = (NumBins + 63) / 64;
  std::array<std::uint64_t, kWords> words_{};
};

}  // namespace heapkit
