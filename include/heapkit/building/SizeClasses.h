// Size classes of a heap of superblocks (combining/SuperblockHeap.h): a request is
// rounded up to the smallest class that holds it, and every object of a superblock has
// its class's size. Two policies with one interface (SizeClassPolicy):
//  - ScalableSizeClasses, by type: libheapkit.so's 36 classes, every function a constant
//    expression, the lookup one load from a table the compiler built;
//  - SizeClassTable, by value: any ascending list of up to 64 sizes, for the simulator and
//    the design search (k classes fitted to a trace), the lookup the same one load;
//  - FixedSizeClasses<16, 48, ...>, by type: any such list as constant expressions, the
//    form `heapkit emit` writes a searched design's classes in (the lookup one load from
//    a table the compiler built, as ScalableSizeClasses's).
// A heap stores its policy as a member; ScalableSizeClasses is empty and takes no room.
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

// What a heap of superblocks asks of its size classes. Sizes are multiples of 16; a
// request of `size` <= maxBytes() gets class classOf(size), whose objects have
// bytesOf(class) >= size bytes, and no smaller class holds it. kMaxClasses bounds count().
template <class C>
concept SizeClassPolicy = requires(const C& classes, std::size_t n) {
  { C::kMaxClasses } -> std::convertible_to<std::size_t>;
  { classes.count() } -> std::convertible_to<std::size_t>;
  { classes.maxBytes() } -> std::convertible_to<std::size_t>;
  { classes.classOf(n) } -> std::convertible_to<std::size_t>;
  { classes.bytesOf(n) } -> std::convertible_to<std::size_t>;
};

namespace sizeclasses {
inline constexpr std::size_t kGranuleBytes = 16;
// The largest class either policy allows: one object of it, after a superblock's header,
// must fit a 64 KiB superblock.
inline constexpr std::size_t kLargestClassBytes = 32 * 1024;
inline constexpr std::size_t kGranules = kLargestClassBytes / kGranuleBytes + 1;
// libheapkit.so's largest class (ScalableSizeClasses, below).
inline constexpr std::size_t kLibheapkitLargestClassBytes = 16 * 1024;

// libheapkit.so's classes: 16-byte steps to 128 B, then four classes per doubling (to 16 KiB
// in libheapkit.so, ScalableSizeClasses; to 32 KiB at most, ScalableSizeClassesUpTo).
constexpr std::size_t scalableClassOf(std::size_t size) {
  if (size <= 128) return size == 0 ? 0 : (size - 1) / 16;
  std::size_t log2 = static_cast<std::size_t>(std::bit_width(size - 1)) - 1;  // size in (2^log2, 2^(log2+1)]
  return 8 + (log2 - 7) * 4 + (((size - 1) >> (log2 - 2)) & 3);
}
constexpr std::size_t scalableBytesOf(std::size_t sizeClass) {
  if (sizeClass < 8) return (sizeClass + 1) * 16;
  std::size_t log2 = 7 + (sizeClass - 8) / 4;
  return (std::size_t{1} << log2) + ((sizeClass - 8) % 4 + 1) * (std::size_t{1} << (log2 - 2));
}
}  // namespace sizeclasses

// libheapkit.so's classes up to LargestClassBytes (a class boundary: 128 B, or a power of
// two or its quarter steps above).
template <std::size_t LargestClassBytes>
struct ScalableSizeClassesUpTo {
  static_assert(LargestClassBytes <= sizeclasses::kLargestClassBytes &&
                sizeclasses::scalableBytesOf(sizeclasses::scalableClassOf(LargestClassBytes)) == LargestClassBytes);
  static constexpr std::size_t kMaxClasses = sizeclasses::scalableClassOf(LargestClassBytes) + 1;
  static constexpr std::size_t count() { return kMaxClasses; }
  static constexpr std::size_t maxBytes() { return LargestClassBytes; }
  // A class is one table load (2 KiB, of which a program touches the lines of the sizes
  // it uses) instead of a branch and a bit scan on every malloc.
  static constexpr std::size_t classOf(std::size_t size) { return kClassOfGranule[(size + 15) / 16]; }
  static constexpr std::size_t bytesOf(std::size_t sizeClass) { return sizeclasses::scalableBytesOf(sizeClass); }

 private:
  static constexpr auto kClassOfGranule = [] {
    std::array<std::uint8_t, LargestClassBytes / sizeclasses::kGranuleBytes + 1> table{};
    for (std::size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<std::uint8_t>(sizeclasses::scalableClassOf(i * sizeclasses::kGranuleBytes));
    return table;
  }();
};

// The 36 classes of libheapkit.so, 16 B to 16 KiB, and of the simulator's page_segregated
// mechanism by default (dmm/DmmSpec.h; python/heapkit/sizeclasses.py DEFAULT_CLASSES and
// `heapkit emit` follow this type). Above 16 KiB blocks are spans of 4 MiB segments
// (building/SegmentHeap.h, threads/OwnedSpanHeap.h), resident only to the request's end
// and sharing their free pages with the other medium blocks: a class of 16-32 KiB holds
// one to three objects a 64 KiB superblock, which a thread kept resident for its few
// objects of it (issue 21: `heapkit-mt-workload buffers 2` peaked 0.5 MB higher with the
// classes to 32 KiB; docs/malloc-replacement.md).
using ScalableSizeClasses = ScalableSizeClassesUpTo<sizeclasses::kLibheapkitLargestClassBytes>;
static_assert(SizeClassPolicy<ScalableSizeClasses> && ScalableSizeClasses::kMaxClasses == 36);
static_assert(ScalableSizeClasses::classOf(1) == 0 && ScalableSizeClasses::classOf(128) == 7 &&
              ScalableSizeClasses::classOf(129) == 8 && ScalableSizeClasses::bytesOf(8) == 160 &&
              ScalableSizeClasses::classOf(256) == 11 && ScalableSizeClasses::bytesOf(11) == 256 &&
              ScalableSizeClasses::maxBytes() == 16 * 1024 &&
              ScalableSizeClasses::classOf(ScalableSizeClasses::maxBytes()) == ScalableSizeClasses::kMaxClasses - 1 &&
              ScalableSizeClasses::bytesOf(ScalableSizeClasses::kMaxClasses - 1) == ScalableSizeClasses::maxBytes());
// The same rule up to the largest class any table may have: 40 classes.
static_assert(ScalableSizeClassesUpTo<sizeclasses::kLargestClassBytes>::kMaxClasses == 40);

class SizeClassTable {
 public:
  static constexpr std::size_t kMaxClasses = 64;

  // Why `sizes` cannot be a table of classes, or nullptr when it can: ascending, distinct
  // multiples of 16, at least 16, at most 32 KiB, at most 64 of them (none at all means
  // no small objects: every request goes to the heap's large-object path).
  static const char* check(std::span<const std::size_t> sizes) {
    if (sizes.size() > kMaxClasses) return "more than 64 size classes";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < kMinObjectBytes || sizes[i] % sizeclasses::kGranuleBytes != 0)
        return "a size class is not a positive multiple of 16 bytes";
      if (sizes[i] > sizeclasses::kLargestClassBytes) return "a size class is over 32 KiB";
      if (i > 0 && sizes[i] <= sizes[i - 1]) return "size classes are not in ascending order";
    }
    return nullptr;
  }

  // libheapkit.so's classes, as values.
  SizeClassTable() {
    std::array<std::size_t, ScalableSizeClasses::kMaxClasses> sizes{};
    for (std::size_t i = 0; i < sizes.size(); ++i) sizes[i] = ScalableSizeClasses::bytesOf(i);
    build(sizes);
  }
  // `sizes` must pass check(); a table that does not is taken as no classes at all, so a
  // heap built on it still serves every request (from its large-object path).
  explicit SizeClassTable(std::span<const std::size_t> sizes) {
    if (check(sizes) == nullptr) build(sizes);
    else build({});
  }

  std::size_t count() const { return count_; }
  std::size_t maxBytes() const { return count_ == 0 ? 0 : bytes_[count_ - 1]; }
  std::size_t classOf(std::size_t size) const { return classOfGranule_[(size + 15) / 16]; }
  std::size_t bytesOf(std::size_t sizeClass) const { return bytes_[sizeClass]; }

 private:
  void build(std::span<const std::size_t> sizes) {
    count_ = sizes.size();
    for (std::size_t i = 0; i < count_; ++i) bytes_[i] = static_cast<std::uint32_t>(sizes[i]);
    std::size_t sizeClass = 0;
    for (std::size_t granule = 0; granule < classOfGranule_.size(); ++granule) {
      while (sizeClass < count_ && bytes_[sizeClass] < granule * sizeclasses::kGranuleBytes) ++sizeClass;
      // Past the largest class: never looked up (such requests are not small).
      classOfGranule_[granule] = static_cast<std::uint8_t>(sizeClass < count_ ? sizeClass : 0);
    }
  }

  std::array<std::uint8_t, sizeclasses::kGranules> classOfGranule_{};
  std::array<std::uint32_t, kMaxClasses> bytes_{};
  std::size_t count_ = 0;
};
static_assert(SizeClassPolicy<SizeClassTable>);

// Any classes SizeClassTable::check accepts, by type: classOf, bytesOf, count and maxBytes
// are constant expressions, so ScalableHeap (which needs its largest class at compile
// time) takes them, and the lookup is one load from a table built at compile time.
template <std::size_t... Bytes>
struct FixedSizeClasses {
  static constexpr std::size_t kSizes[] = {Bytes..., 0};  // the 0 keeps an empty list an array
  static constexpr std::size_t kCount = sizeof...(Bytes);
  static_assert(kCount <= SizeClassTable::kMaxClasses, "at most 64 size classes");
  static_assert([] {
    for (std::size_t i = 0; i < kCount; ++i) {
      if (kSizes[i] < kMinObjectBytes || kSizes[i] % sizeclasses::kGranuleBytes != 0) return false;
      if (kSizes[i] > sizeclasses::kLargestClassBytes || (i > 0 && kSizes[i] <= kSizes[i - 1])) return false;
    }
    return true;
  }(), "size classes are ascending, distinct multiples of 16 bytes, 16 B to 32 KiB");

  static constexpr std::size_t kMaxClasses = kCount == 0 ? 1 : kCount;
  static constexpr std::size_t count() { return kCount; }
  static constexpr std::size_t maxBytes() { return kCount == 0 ? 0 : kSizes[kCount - 1]; }
  static constexpr std::size_t classOf(std::size_t size) { return kClassOfGranule[(size + 15) / 16]; }
  static constexpr std::size_t bytesOf(std::size_t sizeClass) { return kSizes[sizeClass]; }

 private:
  // Up to the largest class, as SizeClassTable's (larger requests are never looked up).
  static constexpr auto kClassOfGranule = [] {
    std::array<std::uint8_t, maxBytes() / sizeclasses::kGranuleBytes + 1> table{};
    std::size_t sizeClass = 0;
    for (std::size_t granule = 0; granule < table.size(); ++granule) {
      while (sizeClass < kCount && kSizes[sizeClass] < granule * sizeclasses::kGranuleBytes) ++sizeClass;
      table[granule] = static_cast<std::uint8_t>(sizeClass < kCount ? sizeClass : 0);
    }
    return table;
  }();
};
static_assert(SizeClassPolicy<FixedSizeClasses<16, 48>> && FixedSizeClasses<16, 48>::classOf(17) == 1 &&
              FixedSizeClasses<16, 48>::classOf(16) == 0 && FixedSizeClasses<>::maxBytes() == 0);

}  // namespace heapkit
