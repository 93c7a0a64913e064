// CoalesceableHeap: boundary tags, overlapped as in dlmalloc. It takes regions from its
// parent (RegionBytes each, or one region per larger request) and lays blocks end to end
// in them, so a block can find and merge with both neighbours in O(1). A fence at the
// end of each region stops the walk.
//
// A block is its object, preceded by one size word: the block's length (from its object
// to the next block's object, a multiple of 16) and flags. Its usable bytes stop at the
// next block's size word, so usable sizes are 24, 40, 56, ... (16k + 8) and each object
// costs 8 bytes, as a dlmalloc chunk does. The previous block's length, needed to merge
// backwards, is written only when that block is free, into its last word (the one just
// before our size word), and our kPreviousFree flag says it is there: while the previous
// block is in use, that word is its data.
//
// Region: [links 16][unused 8][size word][block ...][size word][block ...]...[fence: size word 0]
//
// It hands out whole regions; CoalesceHeap above splits and merges the blocks inside
// them and gives a region back once it is wholly free.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t RegionBytes, Heap Super>
class CoalesceableHeap : public Super {
  struct RegionLinks {
    RegionLinks* prev;
    RegionLinks* next;
  };
  static constexpr std::size_t kFree = 1;
  static constexpr std::size_t kFirstInRegion = 2;
  static constexpr std::size_t kPreviousFree = 4;
  static constexpr std::size_t kSizeWordBytes = sizeof(std::size_t);
  // Links, then the first block's size word placed so that its object is 16-byte aligned.
  static constexpr std::size_t kRegionPrefixBytes = 2 * kMinAlignment;
  // The prefix and the fence's size word, which sits in the last block's final 8 bytes.
  static constexpr std::size_t kOverhead = kRegionPrefixBytes + kSizeWordBytes;
  static_assert(sizeof(RegionLinks) + kSizeWordBytes <= kRegionPrefixBytes);
  static_assert(RegionBytes % kMinAlignment == 0 && RegionBytes > kOverhead + kMinAlignment);

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  // The smallest block worth splitting off: its size word plus room for a free-list node
  // and the length word a free block keeps at its end.
  static constexpr std::size_t kMinBlockBytes = 32;

  // The usable bytes a block gets for a request: the next 16k + 8, at least 24.
  static constexpr std::size_t usableSizeFor(std::size_t size) {
    std::size_t usable = alignUp(size + kSizeWordBytes, kMinAlignment) - kSizeWordBytes;
    return usable < kMinBlockBytes - kSizeWordBytes ? kMinBlockBytes - kSizeWordBytes : usable;
  }

  using Super::Super;
  CoalesceableHeap() = default;

  ~CoalesceableHeap() {
    while (regions_ != nullptr) releaseRegionLinks(regions_);
  }

  // A fresh region whose single block is at least `size` usable bytes, in use.
  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, kOverhead + kSizeWordBytes, kMinAlignment)) return nullptr;
    std::size_t bytes = usableSizeFor(size) + kOverhead;
    if (bytes < RegionBytes) bytes = RegionBytes;
    auto* links = static_cast<RegionLinks*>(Super::malloc(bytes));
    if (links == nullptr) return nullptr;
    if constexpr (SizedHeap<Super>) {
      // Use whatever the parent rounded up to (whole pages, say).
      std::size_t given = Super::getSize(links) & ~(kMinAlignment - 1);
      if (given > bytes) bytes = given;
    }
    links->prev = nullptr;
    links->next = regions_;
    if (regions_ != nullptr) regions_->prev = links;
    regions_ = links;

    char* first = reinterpret_cast<char*>(links) + kRegionPrefixBytes;
    std::size_t firstBytes = bytes - kRegionPrefixBytes;
    sizeWord(first) = firstBytes | kFirstInRegion;
    sizeWord(first + firstBytes) = 0;  // the fence: a block of length 0, never free
    countWork(*this, 1, 1, 5);
    return first;
  }

  // Blocks are given back by CoalesceHeap; only a whole region can go to the parent.
  // Other blocks stay where they are until the heap is destroyed.
  void free(void* block) {
    if (block != nullptr && isWholeRegion(block)) releaseRegion(block);
  }

  std::size_t getSize(void* block) const { return usable(block); }

  // Boundary-tag operations, for CoalesceHeap.
  static std::size_t usable(void* block) { return blockBytes(block) - kSizeWordBytes; }
  static bool isFree(void* block) { return (sizeWord(block) & kFree) != 0; }
  // A free block tells the next block its length, in its own last word.
  static void setFree(void* block) {
    sizeWord(block) |= kFree;
    void* following = next(block);
    previousBytes(following) = blockBytes(block);
    sizeWord(following) |= kPreviousFree;
  }
  static void setInUse(void* block) {
    sizeWord(block) &= ~kFree;
    sizeWord(next(block)) &= ~kPreviousFree;
  }
  static void* next(void* block) { return static_cast<char*>(block) + blockBytes(block); }
  static bool previousIsFree(void* block) { return (sizeWord(block) & kPreviousFree) != 0; }
  // Only when previousIsFree(block): otherwise the length word is the previous block's data.
  static void* previous(void* block) { return static_cast<char*>(block) - previousBytes(block); }
  static bool isWholeRegion(void* block) {
    return (sizeWord(block) & kFirstInRegion) != 0 && blockBytes(next(block)) == 0;
  }

  // Cut `block` (in use) to `keep` usable bytes, a value of usableSizeFor; returns the
  // remainder, a block of its own, in use. Requires usable(block) >= keep + kMinBlockBytes.
  static void* split(void* block, std::size_t keep) {
    std::size_t total = blockBytes(block), keepBytes = keep + kSizeWordBytes;
    char* rest = static_cast<char*>(block) + keepBytes;
    sizeWord(block) = keepBytes | (sizeWord(block) & sizeword::kFlagMask);
    sizeWord(rest) = total - keepBytes;
    return rest;
  }

  // Absorb `following`, which must be next(block); setFree writes the merged length.
  static void merge(void* block, void* following) {
    sizeWord(block) = (blockBytes(block) + blockBytes(following)) | (sizeWord(block) & sizeword::kFlagMask);
  }

  void releaseRegion(void* wholeRegionBlock) {
    releaseRegionLinks(reinterpret_cast<RegionLinks*>(static_cast<char*>(wholeRegionBlock) - kRegionPrefixBytes));
  }

 private:
  static std::size_t& sizeWord(void* block) { return *sizeword::wordOf(block); }
  static std::size_t& previousBytes(void* block) { return *(sizeword::wordOf(block) - 1); }
  static std::size_t blockBytes(void* block) { return sizeWord(block) & ~sizeword::kFlagMask; }

  void releaseRegionLinks(RegionLinks* links) {
    if (links->prev != nullptr) links->prev->next = links->next;
    else regions_ = links->next;
    if (links->next != nullptr) links->next->prev = links->prev;
    Super::free(links);
  }

  RegionLinks* regions_ = nullptr;
};

}  // namespace heapkit
