// CoalesceableHeap: boundary tags. It takes regions from its parent (RegionBytes each,
// or one region per larger request) and gives each block a 16-byte header holding the
// previous block's length and its own usable size with flags, so a block can find and
// merge with both neighbours in O(1). A fence at the end of each region stops the walk.
//
// Region: [links 16][block header 16][block ...][block header 16][block ...]...[fence 16]
//
// It hands out whole regions; CoalesceHeap above splits and merges the blocks inside
// them and gives a region back once it is wholly free.
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t RegionBytes, Heap Super>
class CoalesceableHeap : public Super {
  struct BlockHeader {
    std::size_t previousBytes;  // length of the previous block, header included
    std::size_t sizeWord;       // usable bytes | flags
  };
  struct RegionLinks {
    RegionLinks* prev;
    RegionLinks* next;
  };
  static constexpr std::size_t kFree = 1;
  static constexpr std::size_t kFirstInRegion = 2;
  static constexpr std::size_t kRegionEnd = 4;
  static constexpr std::size_t kOverhead = sizeof(RegionLinks) + 2 * sizeof(BlockHeader);
  static_assert(RegionBytes % kMinAlignment == 0 && RegionBytes > kOverhead);

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr std::size_t kHeaderBytes = sizeof(BlockHeader);
  // The smallest block worth splitting off: a header plus room for a free-list node.
  static constexpr std::size_t kMinBlockBytes = kHeaderBytes + 16;

  using Super::Super;
  CoalesceableHeap() = default;

  ~CoalesceableHeap() {
    while (regions_ != nullptr) releaseRegionLinks(regions_);
  }

  // A fresh region whose single block is at least `size` usable bytes, in use.
  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, kOverhead, kMinAlignment)) return nullptr;
    std::size_t bytes = usableBytesFor(size) + kOverhead;
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

    char* first = reinterpret_cast<char*>(links + 1) + kHeaderBytes;
    std::size_t usable = bytes - kOverhead;
    header(first)->previousBytes = 0;
    header(first)->sizeWord = usable | kFirstInRegion;
    BlockHeader* fence = header(first + usable + kHeaderBytes);
    fence->previousBytes = usable + kHeaderBytes;
    fence->sizeWord = kRegionEnd;
    return first;
  }

  // Blocks are given back by CoalesceHeap; only a whole region can go to the parent.
  // Other blocks stay where they are until the heap is destroyed.
  void free(void* block) {
    if (block != nullptr && isWholeRegion(block)) releaseRegion(block);
  }

  std::size_t getSize(void* block) const { return sizeword::size(block); }

  // Boundary-tag operations, for CoalesceHeap.
  static std::size_t usable(void* block) { return header(block)->sizeWord & ~sizeword::kFlagMask; }
  static bool isFree(void* block) { return (header(block)->sizeWord & kFree) != 0; }
  static void setFree(void* block) { header(block)->sizeWord |= kFree; }
  static void setInUse(void* block) { header(block)->sizeWord &= ~kFree; }
  static void* next(void* block) { return static_cast<char*>(block) + usable(block) + kHeaderBytes; }
  static bool hasPrevious(void* block) { return (header(block)->sizeWord & kFirstInRegion) == 0; }
  static void* previous(void* block) { return static_cast<char*>(block) - header(block)->previousBytes; }
  static bool isWholeRegion(void* block) {
    return !hasPrevious(block) && (header(next(block))->sizeWord & kRegionEnd) != 0;
  }

  // Cut `block` to `keep` usable bytes; returns the remainder, a block of its own
  // (in use). Requires usable(block) >= keep + kMinBlockBytes.
  static void* split(void* block, std::size_t keep) {
    std::size_t total = usable(block);
    char* rest = static_cast<char*>(block) + keep + kHeaderBytes;
    header(block)->sizeWord = keep | (header(block)->sizeWord & sizeword::kFlagMask);
    header(rest)->previousBytes = keep + kHeaderBytes;
    header(rest)->sizeWord = total - keep - kHeaderBytes;
    header(next(rest))->previousBytes = usable(rest) + kHeaderBytes;
    return rest;
  }

  // Absorb `following`, which must be next(block).
  static void merge(void* block, void* following) {
    std::size_t merged = usable(block) + usable(following) + kHeaderBytes;
    header(block)->sizeWord = merged | (header(block)->sizeWord & sizeword::kFlagMask);
    header(next(block))->previousBytes = merged + kHeaderBytes;
  }

  void releaseRegion(void* wholeRegionBlock) {
    releaseRegionLinks(reinterpret_cast<RegionLinks*>(static_cast<char*>(wholeRegionBlock) - kHeaderBytes) - 1);
  }

 private:
  static BlockHeader* header(void* block) { return static_cast<BlockHeader*>(block) - 1; }

  void releaseRegionLinks(RegionLinks* links) {
    if (links->prev != nullptr) links->prev->next = links->next;
    else regions_ = links->next;
    if (links->next != nullptr) links->next->prev = links->prev;
    Super::free(links);
  }

  RegionLinks* regions_ = nullptr;
};

}  // namespace heapkit
