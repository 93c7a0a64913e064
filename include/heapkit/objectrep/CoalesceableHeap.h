// CoalesceableHeap: boundary tags, overlapped as in dlmalloc (objectrep/BoundaryTags.h).
// It takes regions from its parent (RegionBytes each, or one region per larger request)
// and lays blocks end to end in them, so a block can find and merge with both neighbours
// in O(1). A fence at the end of each region stops the walk.
//
// Region: [links 16][unused 8][size word][block ...][size word][block ...]...[fence: size word 0]
//
// It hands out whole regions; CoalesceHeap above splits and merges the blocks inside
// them and gives a region back once it is wholly free.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/objectrep/BoundaryTags.h"

namespace heapkit {

template <std::size_t RegionBytes, Heap Super>
class CoalesceableHeap : public Super, public BoundaryTags {
  struct RegionLinks {
    RegionLinks* prev;
    RegionLinks* next;
  };
  static constexpr std::size_t kFirstInRegion = 2;
  // Links, then the first block's size word placed so that its object is 16-byte aligned.
  static constexpr std::size_t kRegionPrefixBytes = 2 * kMinAlignment;
  // The prefix and the fence's size word, which sits in the last block's final 8 bytes.
  static constexpr std::size_t kOverhead = kRegionPrefixBytes + kSizeWordBytes;
  static_assert(sizeof(RegionLinks) + kSizeWordBytes <= kRegionPrefixBytes);
  static_assert(RegionBytes % kMinAlignment == 0 && RegionBytes > kOverhead + kMinAlignment);

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  using Super::Super;
  CoalesceableHeap() = default;

  ~CoalesceableHeap() {
    while (regions_ != nullptr) releaseRegionLinks(regions_);
  }

  // A fresh region whose single block is at least `size` usable bytes, in use.
  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, kOverhead + kSizeWordBytes, kMinAlignment)) return nullptr;
    std::size_t bytes = usableSizeFor(size) + kOverhead;
    if (bytes < regionBytes_) bytes = regionBytes_;
    auto* links = static_cast<RegionLinks*>(Super::malloc(bytes));
    if (links == nullptr) return nullptr;
    if constexpr (SizedHeap<Super>) {
      // Use whatever the parent rounded up to (whole pages, say).
      std::size_t given = Super::getSize(links) & ~(kMinAlignment - 1);
      if (given > bytes) bytes = given;
    }
    countStep(*this);  // the region requested
    RegionLinks* head = loadMetadata(*this, regions_);
    storeMetadata(*this, links->prev, nullptr);
    storeMetadata(*this, links->next, head);
    if (head != nullptr) storeMetadata(*this, head->prev, links);
    storeMetadata(*this, regions_, links);

    char* first = reinterpret_cast<char*>(links) + kRegionPrefixBytes;
    std::size_t firstBytes = bytes - kRegionPrefixBytes;
    storeMetadata(*this, sizeWord(first), firstBytes | kFirstInRegion);
    storeMetadata(*this, sizeWord(first + firstBytes), std::size_t{0});  // the fence: a block of length 0, never free
    return first;
  }

  // Blocks are given back by CoalesceHeap; only a whole region can go to the parent.
  // Other blocks stay where they are until the heap is destroyed.
  void free(void* block) {
    if (block != nullptr && isWholeRegion(*this, block)) releaseRegion(block);
  }

  std::size_t getSize(void* block) const { return usable(block); }

  // With the boundary-tag operations (BoundaryTags), for CoalesceHeap.
  template <class H>
  static bool isWholeRegion(H& heap, void* block) {
    return (loadMetadata(heap, sizeWord(block)) & kFirstInRegion) != 0 && blockBytes(heap, next(heap, block)) == 0;
  }
  static bool isWholeRegion(void* block) {
    Uncounted none;
    return isWholeRegion(none, block);
  }

  // Regions are RegionBytes at least, and from growRegionsFor(size) on, big enough for a
  // request of `size` bytes: a layer above (AdaptiveSelectMmapHeap) asks for it with its
  // mmap threshold once the program shows it uses blocks that big. Every request that
  // comes here then fits in any region, so a region freed whole serves the next request,
  // and big blocks share regions instead of taking one each, freed whole, given back and
  // mapped again (buffers of 16-256 KiB replaced in a loop: a system call and a page
  // fault a page for most of them).
  std::size_t regionBytes() const { return regionBytes_; }
  void growRegionsFor(std::size_t size) {
    if (!fitsAfterAlignUp(size, kOverhead + kSizeWordBytes, kMinAlignment)) return;
    std::size_t bytes = usableSizeFor(size) + kOverhead;
    if (bytes > regionBytes_) regionBytes_ = bytes;
  }

  void releaseRegion(void* wholeRegionBlock) {
    releaseRegionLinks(reinterpret_cast<RegionLinks*>(static_cast<char*>(wholeRegionBlock) - kRegionPrefixBytes));
  }

 private:
  void releaseRegionLinks(RegionLinks* links) {
    RegionLinks* prev = loadMetadata(*this, links->prev);
    RegionLinks* next = loadMetadata(*this, links->next);
    if (prev != nullptr) storeMetadata(*this, prev->next, next);
    else storeMetadata(*this, regions_, next);
    if (next != nullptr) storeMetadata(*this, next->prev, prev);
    countStep(*this);  // the region returned
    Super::free(links);
  }

  RegionLinks* regions_ = nullptr;
  std::size_t regionBytes_ = RegionBytes;
};

}  // namespace heapkit
