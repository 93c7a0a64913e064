// ShortLivedSizes: placement by lifetime. The request sizes whose objects a trace shows to
// die young (most of their objects freed long before the program's live bytes peak), as a
// set a DMM design routes to an allocator of their own, the short-lived area, before its
// size ranges are consulted. Long-lived objects then pack densely in the allocators of
// the ranges, and the churn of the short-lived ones (most of a program's operations) stays
// in its own chunks or superblocks, which empty and are reused as a whole.
//
// The set is a list of size ranges (min, max] with 16-byte bounds, kept as a bitmap of
// 16-byte granules up to kMaxBytes: one load and a bit test decide a request, the same
// in the simulator (built from a spec's values at run time) and in an emitted design (a
// constexpr object, which the compiler folds into the routing):
//
//   ShortLivedSizes sizes;                  // run time: DmmSpec::shortLived.sizes
//   sizes.add(0, 64); sizes.add(96, 128);   // requests of 1..64 and 97..128 bytes
//   struct Nursery { static constexpr ShortLivedSizes sizes = ShortLivedSizes::of({{0, 64}, {96, 128}}); };
//
// A request of size s is in (min, max] exactly when its granule count ceil(s / 16) is in
// (min / 16, max / 16], because both bounds are multiples of 16.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

namespace heapkit {

class ShortLivedSizes {
 public:
  static constexpr std::size_t kGranule = 16;
  // Requests above this many bytes are never in the set: short-lived objects worth an
  // area of their own are small or medium, and the bitmap stays 512 bytes.
  static constexpr std::size_t kMaxBytes = 64 * 1024;
  static constexpr std::size_t kMaxRanges = 32;
  static constexpr std::size_t kWords = kMaxBytes / kGranule / 64;

  constexpr ShortLivedSizes() = default;

  // A set of ranges, each (min, max] as add() takes it; for constant expressions.
  static constexpr ShortLivedSizes of(std::initializer_list<std::pair<std::size_t, std::size_t>> ranges) {
    ShortLivedSizes set;
    for (auto [min, max] : ranges) set.add(min, max);
    return set;
  }

  // Why (min, max] cannot be added (nullptr: it can): bounds are multiples of 16, min < max
  // <= kMaxBytes, above the previous range's max, and at most kMaxRanges ranges.
  constexpr const char* refuses(std::size_t min, std::size_t max) const {
    if (min % kGranule != 0 || max % kGranule != 0) return "range bounds are multiples of 16";
    if (max <= min) return "max must be above min: a range is (min, max]";
    if (max > kMaxBytes) return "short-lived sizes end at 65536 bytes or below";
    if (count_ != 0 && min < ranges_[count_ - 1].second) return "ranges ascend without overlapping";
    if (count_ == kMaxRanges) return "at most 32 ranges";
    return nullptr;
  }

  // Adds (min, max]; a call refuses() refuses is ignored (the spec reader checks first).
  constexpr void add(std::size_t min, std::size_t max) {
    if (refuses(min, max) != nullptr) return;
    ranges_[count_++] = {min, max};
    for (std::size_t g = min / kGranule + 1; g <= max / kGranule; ++g) bits_[(g - 1) / 64] |= std::uint64_t{1} << ((g - 1) % 64);
  }

  constexpr bool contains(std::size_t size) const {
    if (size == 0 || size > kMaxBytes) return false;
    std::size_t g = (size + kGranule - 1) / kGranule - 1;
    return (bits_[g / 64] >> (g % 64)) & 1;
  }

  constexpr bool empty() const { return count_ == 0; }
  constexpr std::size_t rangeCount() const { return count_; }
  constexpr std::pair<std::size_t, std::size_t> range(std::size_t i) const { return ranges_[i]; }

 private:
  std::array<std::uint64_t, kWords> bits_{};
  std::array<std::pair<std::size_t, std::size_t>, kMaxRanges> ranges_{};
  std::size_t count_ = 0;
};

}  // namespace heapkit
