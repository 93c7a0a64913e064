// CoalesceHeap: splitting and coalescing over boundary tags (CoalesceableHeap, reached
// through the free-block dictionaries between them). malloc cuts the block it gets down
// to size and frees the rest; free merges the block with free neighbours before storing
// it, and gives a wholly free region back.
//
// A free neighbour is taken out of whatever bin holds it with DLList::unlink, so every
// dictionary between this layer and CoalesceableHeap must be a DLList.
#pragma once

#include <algorithm>
#include <cstddef>

#include "heapkit/building/DLList.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <SizedHeap Super>
class CoalesceHeap : public Super {
 public:
  using Super::Super;
  CoalesceHeap() = default;

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, 0, kMinAlignment)) return nullptr;
    std::size_t wanted = roundRequest(size);
    return carve(Super::malloc(wanted), wanted);
  }

  // Only from blocks already free below; nullptr rather than a new region.
  void* mallocCached(std::size_t size)
    requires requires(Super& s) { s.mallocCached(size); }
  {
    if (!fitsAfterAlignUp(size, 0, kMinAlignment)) return nullptr;
    std::size_t wanted = roundRequest(size);
    return carve(Super::mallocCached(wanted), wanted);
  }

  void free(void* block) {
    if (block == nullptr) return;
    if constexpr (hardened<Super>()) Super::checkFreeable(block);
    release(block);
  }

  // Hardened: a block a quick list above kept, marked retired (QuickListHeap), given back.
  // Its own word was checked when the list took it, and the mark has kept it from every
  // free since: BoundaryTags::unretire checks only that the word was not overwritten since
  // (the mark, a block's length) and the next block's word, which the list could not check
  // cheaply when it took it.
  void freeRetired(void* block)
    requires(hardened<Super>() && requires { Super::unretire(block); })
  {
    Super::unretire(block);
    release(block);
  }

 private:
  // Merge `block`, in use and checked, with its free neighbours and store the result.
  [[gnu::always_inline]] void release(void* block) {
    // The tag operations and the list count each word they touch (they are given this heap).
    void* following = Super::next(*this, block);
    if (Super::isFree(*this, following)) {
      DLList::unlink(*this, following);
      Super::merge(*this, block, following);
      countCoalesce(*this);
    }
    if (Super::previousIsFree(*this, block)) {
      void* preceding = Super::previous(*this, block);
      DLList::unlink(*this, preceding);
      Super::merge(*this, preceding, block);
      // Hardened, the block's word, now stale inside the merged block, says so: a second
      // free of it is reported there (BoundaryTags::kRetired), not taken for a live block.
      if constexpr (hardened<Super>() && requires { Super::markRetired(block); }) Super::markRetired(block);
      block = preceding;
      countCoalesce(*this);
    }
    if (Super::isWholeRegion(*this, block)) {
      Super::releaseRegion(block);
      return;
    }
    Super::setFree(*this, block);
    Super::free(block);
  }

  // The usable size the boundary tags give a request (they decide the granularity).
  static std::size_t roundRequest(std::size_t size) { return Super::usableSizeFor(size); }

  void* carve(void* block, std::size_t wanted) {
    if (block == nullptr) return nullptr;
    Super::setInUse(*this, block);
    // The remainder cannot have a free neighbour after it: the block came either from a
    // free list (free blocks are never adjacent) or fresh from the end of a region.
    if (Super::usable(*this, block) >= wanted + Super::kMinBlockBytes) {
      void* rest = Super::split(*this, block, wanted);
      Super::setFree(*this, rest);
      countSplit(*this);
      Super::free(rest);
    }
    return block;
  }
};

}  // namespace heapkit
