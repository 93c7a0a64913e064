// ReapBoundaryTags: a reap's chunks as a layer of blocks with boundary tags, so that Lea's
// bins, splitting and coalescing (LeaCoalescingHeap in general/LeaHeap.h) can manage the
// objects a reap frees: it takes the place CoalesceableHeap has in LeaHeap, below
// CoalesceHeap.
//
// A reap lays its objects end to end in its chunks, each after an 8-byte size word: the
// overlapped boundary tags of dlmalloc (objectrep/BoundaryTags.h). What differs from
// CoalesceableHeap's regions:
//  - a fresh block is bumped out of the reap's current chunk (the bins had none);
//  - in the current chunk the blocks end at the bump pointer, where no size word has been
//    written: that "block" is never free, and a block freed next to it (merged with a
//    free block before it) goes back to the unbumped space, to be bumped again. This is
//    CoalesceHeap's hook for giving back a wholly free region (isWholeRegion,
//    releaseRegion), which the bump pointer's end of the chunk plays here;
//  - the reap writes a fence (a size word of 0) after the last block of a chunk it leaves
//    and of a chunk of one object.
// Nothing else goes back: the blocks die with the reap's chunks (clear()).
//
// `Reap` gives: bumpPointer(), bumpBlock(bytes) (a block with its size word, or nullptr)
// and unbump(block) (the bump pointer moves back to `block`).
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"
#include "heapkit/objectrep/BoundaryTags.h"

namespace heapkit {

template <class Reap>
class ReapBoundaryTags : public BoundaryTags {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;

  explicit ReapBoundaryTags(Reap* reap) : reap_(reap) {}
  ReapBoundaryTags(const ReapBoundaryTags&) = delete;
  ReapBoundaryTags& operator=(const ReapBoundaryTags&) = delete;

  // A fresh block of `usable` bytes (a value of usableSizeFor), in use.
  void* malloc(std::size_t usable) { return reap_->bumpBlock(usable + kSizeWordBytes); }
  // CoalesceHeap keeps every free block in its bins; they die with the chunks.
  void free(void*) {}
  std::size_t getSize(void* block) const { return usable(block); }

  // The boundary-tag operations that must know where the bump pointer is.
  template <class H>
  bool isFree(H& heap, void* block) const {
    return block != reap_->bumpPointer() && BoundaryTags::isFree(heap, block);
  }
  bool isFree(void* block) const { return block != reap_->bumpPointer() && BoundaryTags::isFree(block); }
  template <class H>
  bool isWholeRegion(H& heap, void* block) const {
    return next(heap, block) == reap_->bumpPointer();
  }
  bool isWholeRegion(void* block) const { return next(block) == reap_->bumpPointer(); }
  void releaseRegion(void* block) { reap_->unbump(block); }

  // Whether CoalesceHeap, freeing `block`, would merge it with a neighbour or give it back
  // to the bump pointer rather than list it (a block too small to be listed needs to).
  bool mergesWhenFreed(void* block) const {
    return previousIsFree(block) || isFree(next(block)) || isWholeRegion(block);
  }

 private:
  Reap* reap_;
};

}  // namespace heapkit
