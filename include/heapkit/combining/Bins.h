// Bins: which bin of a segregated heap a size goes to, the one bin policy of SegHeap,
// StrictSegHeap and SegregatedFitHeap. Bin b holds the sizes in (boundOf(b-1), boundOf(b)];
// a size above every bin's bound has no bin (binOf returns count() or more), and a last bound of
// SIZE_MAX makes the last bin take every longer size. Set by type or by value, as
// BuddyHeap's size classes are:
//  - FunctionBins<N, SizeToBin, BinToBound>, by type: two constant-expression functions
//    (Kingsley's powers of two, Lea's bins); the lookup is the function, inlined;
//  - FixedBins<B0, B1, ...>, by type: ascending bounds as constants (the form `heapkit
//    emit` writes a searched design's bins in), and ExactBins<MaxBytes>, a bin per 16 bytes;
//  - BinTable, by value: up to 256 ascending bounds, or one bin per 16 bytes (exact
//    fits), for the simulator and the design search, which build thousands of designs
//    without a compiler.
// A heap keeps its policy as a member; the by-type policies are empty and take no room.
// A lookup is arithmetic on the policy's own constants, not the heap's metadata, so it is
// not counted as an access; the heaps count one step per lookup.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <type_traits>

namespace heapkit {

template <class B>
concept BinPolicy = requires(const B& bins, std::size_t n) {
  { B::kMaxBins } -> std::convertible_to<std::size_t>;  // the bins a heap's arrays hold (BinTable::exact may count more)
  { bins.count() } -> std::convertible_to<std::size_t>;
  { bins.binOf(n) } -> std::convertible_to<std::size_t>;
  { bins.boundOf(n) } -> std::convertible_to<std::size_t>;
};

template <std::size_t NumBins, std::size_t (*SizeToBin)(std::size_t), std::size_t (*BinToBound)(std::size_t)>
struct FunctionBins {
  static constexpr std::size_t kMaxBins = NumBins;
  static constexpr std::size_t count() { return NumBins; }
  static constexpr std::size_t binOf(std::size_t size) { return SizeToBin(size); }
  static constexpr std::size_t boundOf(std::size_t bin) { return BinToBound(bin); }
};

template <std::size_t... Bounds>
struct FixedBins {
  static constexpr std::size_t kBounds[] = {Bounds...};
  static constexpr std::size_t kMaxBins = sizeof...(Bounds);
  static_assert(kMaxBins > 0, "at least one bin");
  static_assert(std::is_sorted(std::begin(kBounds), std::end(kBounds)) &&
                    std::adjacent_find(std::begin(kBounds), std::end(kBounds)) == std::end(kBounds),
                "bin bounds are ascending and distinct");
  static constexpr std::size_t count() { return kMaxBins; }
  static constexpr std::size_t binOf(std::size_t size) {
    return static_cast<std::size_t>(std::lower_bound(kBounds, kBounds + kMaxBins, size) - kBounds);
  }
  static constexpr std::size_t boundOf(std::size_t bin) { return kBounds[bin]; }
};

// One bin per 16-byte granule up to MaxBytes and a last bin that takes every longer size,
// by type: BinTable::exact(MaxBytes)'s bins as constants (exact fits, emitted).
template <std::size_t MaxBytes>
struct ExactBins {
  static constexpr std::size_t kStep = 16;
  static constexpr std::size_t kMaxBins = MaxBytes / kStep + 1;
  static constexpr std::size_t count() { return kMaxBins; }
  static constexpr std::size_t binOf(std::size_t size) { return std::min(size / kStep, kMaxBins - 1); }
  static constexpr std::size_t boundOf(std::size_t bin) { return bin + 1 < kMaxBins ? bin * kStep + kStep - 1 : SIZE_MAX; }
};

class BinTable {
 public:
  static constexpr std::size_t kMaxBins = 256;

  // Why `bounds` cannot be a table of bins, or nullptr when it can.
  static constexpr const char* check(std::span<const std::size_t> bounds) {
    if (bounds.empty() || bounds.size() > kMaxBins) return "between 1 and 256 bins";
    for (std::size_t i = 1; i < bounds.size(); ++i)
      if (bounds[i] <= bounds[i - 1]) return "bin bounds are not ascending";
    return nullptr;
  }

  // One bin that takes every size.
  constexpr BinTable() { bounds_[0] = SIZE_MAX; }

  // Bins by their bounds, which must pass check(); a table that does not is taken as one
  // bin that takes every size, so a heap built on it still serves every request.
  static constexpr BinTable bounded(std::span<const std::size_t> bounds) {
    BinTable table;
    if (check(bounds) != nullptr) return table;
    table.count_ = bounds.size();
    std::copy(bounds.begin(), bounds.end(), table.bounds_);
    table.searched_ = table.count_ - (bounds.back() == SIZE_MAX ? 1 : 0);
    return table;
  }
  // One bin per 16-byte granule up to `maxBytes` (bin b holds the sizes 16b to 16b + 15, so
  // a block length, a multiple of 16, is in bin length / 16), and a last bin that takes
  // every longer size: exact fits, bins too many for bounds.
  static constexpr BinTable exact(std::size_t maxBytes) {
    BinTable table;
    table.exact_ = true;
    table.count_ = maxBytes / kExactStep + 1;
    return table;
  }

  constexpr std::size_t count() const { return count_; }
  constexpr std::size_t binOf(std::size_t size) const {
    if (exact_) return std::min(size / kExactStep, count_ - 1);
    // An open last bin (bound SIZE_MAX) is where a search of the others ends.
    return static_cast<std::size_t>(std::lower_bound(bounds_, bounds_ + searched_, size) - bounds_);
  }
  constexpr std::size_t boundOf(std::size_t bin) const {
    if (exact_) return bin + 1 < count_ ? bin * kExactStep + kExactStep - 1 : SIZE_MAX;
    return bounds_[bin];
  }

 private:
  static constexpr std::size_t kExactStep = 16;

  bool exact_ = false;
  std::size_t count_ = 1;
  std::size_t searched_ = 0;  // the bounds a lookup searches: all but an open last one
  std::size_t bounds_[kMaxBins] = {};
};

// Bins whose count is a constant (FunctionBins, FixedBins): every one of kMaxBins is used.
template <class B>
concept BinsByType = BinPolicy<B> && requires { typename std::integral_constant<std::size_t, B::count()>; };

// For a heap's constructors: bins by value come first, before its parent's arguments.
template <class Bins, class... Args>
inline constexpr bool startsWithBins = false;
template <class Bins, class First, class... Rest>
inline constexpr bool startsWithBins<Bins, First, Rest...> = std::is_same_v<std::remove_cvref_t<First>, Bins>;

static_assert(BinPolicy<BinTable> && BinPolicy<FixedBins<16, 32>> && BinsByType<FixedBins<16, 32>> && !BinsByType<BinTable>);
static_assert(ExactBins<64>::count() == BinTable::exact(64).count() && ExactBins<64>::binOf(48) == 3 &&
              ExactBins<64>::binOf(1000) == 4 && ExactBins<64>::boundOf(3) == 63 && ExactBins<64>::boundOf(4) == SIZE_MAX);
static_assert(FixedBins<32, 64, SIZE_MAX>::binOf(33) == 1 && FixedBins<32, 64>::binOf(65) == 2 &&
              BinTable::exact(64).binOf(48) == 3 && BinTable::exact(64).binOf(63) == 3 &&
              BinTable::exact(64).boundOf(3) == 63 && BinTable::exact(64).binOf(1000) == 4 &&
              BinTable::exact(64).boundOf(4) == SIZE_MAX && BinTable().binOf(SIZE_MAX) == 0);

}  // namespace heapkit
