// A bitmap of non-empty bins, so a segregated heap finds the next bin worth searching
// with a count-trailing-zeros instead of a walk over empty ones.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace heapkit {

template <std::size_t NumBins>
class SizeClassBitmap {
 public:
  static constexpr std::size_t kNone = NumBins;

  void set(std::size_t bin) { words_[bin / 64] |= std::uint64_t{1} << (bin % 64); }
  void clear(std::size_t bin) { words_[bin / 64] &= ~(std::uint64_t{1} << (bin % 64)); }

  // The first marked bin >= bin, or kNone.
  std::size_t firstAtOrAbove(std::size_t bin) const {
    if (bin >= NumBins) return kNone;
    std::size_t word = bin / 64;
    std::uint64_t bits = words_[word] & (~std::uint64_t{0} << (bin % 64));
    while (bits == 0) {
      if (++word == kWords) return kNone;
      bits = words_[word];
    }
    return word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
  }

 private:
  static constexpr std::size_t kWords = (NumBins + 63) / 64;
  std::array<std::uint64_t, kWords> words_{};
};

}  // namespace heapkit
