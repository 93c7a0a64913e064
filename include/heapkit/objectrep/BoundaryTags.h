// BoundaryTags: the block operations of dlmalloc's overlapped boundary tags, for the
// layers whose blocks carry them (CoalesceableHeap's regions, a reap's chunks) and for
// CoalesceHeap, which splits and merges blocks through them.
//
// A block is its object, preceded by one size word: the block's length (from its object
// to the next block's object, a multiple of 16) and flags. Its usable bytes stop at the
// next block's size word, so usable sizes are 24, 40, 56, ... (16k + 8) and each object
// costs 8 bytes, as a dlmalloc chunk does. The previous block's length, needed to merge
// backwards, is written only when that block is free, into its last word (the one just
// before our size word), and our kPreviousFree flag says it is there: while the previous
// block is in use, that word is its data. Flag 2 is left to the layer that lays the
// blocks out; flag 8 is the routing layer's (core/SizeWord.h).
//
// Where a run of blocks ends, the layer that lays them out must make sure the word after
// the last block is not taken for a free block (a fence: a size word of 0).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

struct BoundaryTags {
  static constexpr std::size_t kFree = 1;
  static constexpr std::size_t kPreviousFree = 4;
  static constexpr std::size_t kSizeWordBytes = sizeof(std::size_t);
  // The smallest block worth splitting off: its size word plus room for a free-list node
  // and the length word a free block keeps at its end.
  static constexpr std::size_t kMinBlockBytes = 32;
  // Where user addresses end (x86-64 and AArch64 with 4-level page tables).
  static constexpr std::uintptr_t kAddressSpaceEnd = std::uintptr_t{1} << 47;

  // The usable bytes a block gets for a request: the next 16k + 8, at least 24.
  static constexpr std::size_t usableSizeFor(std::size_t size) {
    std::size_t usable = alignUp(size + kSizeWordBytes, kMinAlignment) - kSizeWordBytes;
    return usable < kMinBlockBytes - kSizeWordBytes ? kMinBlockBytes - kSizeWordBytes : usable;
  }

  // Each operation takes the heap whose blocks these are: the size words and tags are its
  // metadata, loaded and stored through it (core/Counting.h), so a counting heap counts
  // each access where it happens. The forms without a heap count nothing (const queries).
  template <class H>
  static std::size_t usable(H& heap, void* block) { return blockBytes(heap, block) - kSizeWordBytes; }
  static std::size_t usable(void* block) { return blockBytes(block) - kSizeWordBytes; }
  template <class H>
  static bool isFree(H& heap, void* block) { return (loadMetadata(heap, sizeWord(block)) & kFree) != 0; }
  static bool isFree(void* block) { return (sizeWord(block) & kFree) != 0; }
  // A free block tells the next block its length, in its own last word.
  template <class H>
  static void setFree(H& heap, void* block) {
    std::size_t word = loadMetadata(heap, sizeWord(block)) | kFree;
    storeMetadata(heap, sizeWord(block), word);
    tellNextFree(heap, block, word & ~sizeword::kFlagMask);
  }
  template <class H>
  static void setInUse(H& heap, void* block) {
    std::size_t word = loadMetadata(heap, sizeWord(block));
    storeMetadata(heap, sizeWord(block), word & ~kFree);
    tellNextInUse(heap, block, word & ~sizeword::kFlagMask);
  }
  // The tags alone, for a layer that writes a block's size word itself and so knows its
  // length (`bytes`): the free block's length in its last word and the next block's
  // kPreviousFree flag set, or that flag cleared once the block is in use again.
  template <class H>
  [[gnu::always_inline]] static void tellNextFree(H& heap, void* block, std::size_t bytes) {
    void* following = static_cast<char*>(block) + bytes;
    storeMetadata(heap, previousBytes(following), bytes);
    storeMetadata(heap, sizeWord(following), loadMetadata(heap, sizeWord(following)) | kPreviousFree);
  }
  template <class H>
  [[gnu::always_inline]] static void tellNextInUse(H& heap, void* block, std::size_t bytes) {
    void* following = static_cast<char*>(block) + bytes;
    storeMetadata(heap, sizeWord(following), loadMetadata(heap, sizeWord(following)) & ~kPreviousFree);
  }
  template <class H>
  static void* next(H& heap, void* block) { return static_cast<char*>(block) + blockBytes(heap, block); }
  static void* next(void* block) { return static_cast<char*>(block) + blockBytes(block); }
  template <class H>
  static bool previousIsFree(H& heap, void* block) { return (loadMetadata(heap, sizeWord(block)) & kPreviousFree) != 0; }
  static bool previousIsFree(void* block) { return (sizeWord(block) & kPreviousFree) != 0; }
  // Only when previousIsFree(block): otherwise the length word is the previous block's data.
  template <class H>
  static void* previous(H& heap, void* block) { return static_cast<char*>(block) - loadMetadata(heap, previousBytes(block)); }

  // Cut `block` (in use) to `keep` usable bytes, a value of usableSizeFor; returns the
  // remainder, a block of its own, in use. Requires usable(block) >= keep + kMinBlockBytes.
  template <class H>
  static void* split(H& heap, void* block, std::size_t keep) {
    std::size_t word = loadMetadata(heap, sizeWord(block));
    std::size_t total = word & ~sizeword::kFlagMask, keepBytes = keep + kSizeWordBytes;
    char* rest = static_cast<char*>(block) + keepBytes;
    storeMetadata(heap, sizeWord(block), keepBytes | (word & sizeword::kFlagMask));
    storeMetadata(heap, sizeWord(rest), total - keepBytes);
    return rest;
  }

  // Hardened heaps mark a block's size word when the block stops being one the heap
  // holds live without becoming a free one: it sits on a quick list (QuickListHeap), or it
  // was merged into the free block before it (CoalesceHeap), which leaves its word stale
  // in the middle of that block. A pointer whose word holds the mark is being freed a
  // second time. The mark is a bit no length has, at the end of the address space: the
  // tests every free makes of a length anyway (checkFreeable's range test, the quick
  // lists' range compare) send a marked block to the report at no cost of their own.
  static constexpr std::size_t kRetired = kAddressSpaceEnd;
  static void markRetired(void* block) { sizeWord(block) |= kRetired; }
  static void clearRetired(void* block) { sizeWord(block) &= ~kRetired; }

  // The quick list (QuickListHeap, one per 16 bytes of usable size) of an in-use block:
  // usable / 16. A block whose word says free or retired gets a value beyond every list
  // (its free bit or mark rotated into the high bits), so the lists' one range compare
  // also refuses blocks this heap holds free and blocks freed twice: the same number of
  // instructions as usable / 16 alone.
  template <class H>
  [[gnu::always_inline]] static std::size_t quickListIndex(H& heap, void* block) {
    constexpr std::size_t kLayoutFlags = sizeword::kFlagMask & ~kFree;  // set on live blocks too
    std::size_t word = loadMetadata(heap, sizeWord(block)) & ~kLayoutFlags;
    // (length | free) / 16 with the free bit on top; length / 16 - 1 == (length - 8) / 16
    // for a length of 16 or more, and a length of 0 wraps beyond every list too.
    return std::rotr(word, 4) - 1;
  }

  // Hardened heaps ask this before freeing a block, as dlmalloc does: a block that is
  // free, or whose next block says so, or whose word is retired, is freed a second time;
  // a length too small to be a block's or running past the end of the address space, or
  // a next block that is not one, means the pointer is not a block's (interior, foreign
  // or corrupted).
  static void checkFreeable(void* block) {
    std::size_t bytes = blockBytes(block);
    checkLength(block, bytes);
    void* following = next(block);
    if (isFree(block)) [[unlikely]] {
      // A block this heap holds free also told its next block its length (setFree);
      // a word that merely has the flag bit (another malloc's chunk header) did not.
      if (previousIsFree(following) && previousBytes(following) == bytes) hardening::doubleFree(block);
      hardening::invalidPointer(block);
    }
    checkFollowing(block, following);
  }

  // Hardened: a block a quick list marked retired when it took it, given back to be freed
  // (QuickListHeap's consolidation). Its word was checked then (the list's range compare:
  // in use, not retired, a block's length) and the mark has sent every free of it since to
  // the full checks. What can have changed is the word itself, overwritten while listed by
  // an overflow of the block before it: it must hold the mark, no bit above it and no free
  // bit (one compare), and then a block's length (checkFreeable's range compare), before
  // the length is trusted. The next block's word is checked as checkFreeable checks it: a
  // made-up pointer whose own word passed the list's compare is stopped here. Plain reads,
  // as the other checks make: the counting heaps are never hardened.
  [[gnu::always_inline]] static void unretire(void* block) {
    std::size_t word = sizeWord(block);
    if ((word & (~(kRetired - 1) | kFree)) != kRetired) [[unlikely]] hardening::corruptFreeList(block);
    std::size_t bytes = word & ~(kRetired | sizeword::kFlagMask);
    checkLength(block, bytes);  // marked, so a bad length reports as no block's
    sizeWord(block) = word & ~kRetired;
    checkFollowing(block, static_cast<char*>(block) + bytes);
  }

  // checkFreeable's and unretire's: `bytes`, the block's length, is a block's and stays
  // within the address space. Both bounds in one unsigned compare (a length under a
  // block's wraps past the upper one). An address at or past the end never gets here: the
  // read of its word faulted.
  [[gnu::always_inline]] static void checkLength(void* block, std::size_t bytes) {
    auto address = reinterpret_cast<std::uintptr_t>(block);
    if (bytes - kMinBlockBytes > kAddressSpaceEnd - kMinBlockBytes - address) [[unlikely]] reportNotABlock(block);
  }
  // checkFreeable's and unretire's checks of the next block's word.
  [[gnu::always_inline]] static void checkFollowing(void* block, void* following) {
    // Merged into the free block before it: its own word is stale, the next block's is not.
    if (previousIsFree(following)) [[unlikely]] hardening::doubleFree(block);
    // A length between the fence's (0) and a block's: lengths are multiples of 16, so 16.
    static_assert(kMinBlockBytes == 2 * kMinAlignment);
    if (blockBytes(following) == kMinAlignment) [[unlikely]] hardening::invalidPointer(block);
  }

  // A length no block has: a retired block's (freed a second time), or no block's.
  [[noreturn, gnu::cold, gnu::noinline]] static void reportNotABlock(void* block) {
    auto address = reinterpret_cast<std::uintptr_t>(block);
    std::size_t word = sizeWord(block);
    std::size_t length = word & ~(kRetired | sizeword::kFlagMask);
    if ((word & ~(kRetired - 1)) == kRetired && length >= kMinBlockBytes && length <= kAddressSpaceEnd - address)
      hardening::doubleFree(block);
    hardening::invalidPointer(block);
  }

  // Absorb `following`, which must be next(block); setFree writes the merged length.
  template <class H>
  static void merge(H& heap, void* block, void* following) {
    std::size_t word = loadMetadata(heap, sizeWord(block));
    std::size_t merged = (word & ~sizeword::kFlagMask) + blockBytes(heap, following);
    storeMetadata(heap, sizeWord(block), merged | (word & sizeword::kFlagMask));
  }

 protected:
  static std::size_t& sizeWord(void* block) { return *sizeword::wordOf(block); }
  template <class H>
  static std::size_t blockBytes(H& heap, void* block) { return loadMetadata(heap, sizeWord(block)) & ~sizeword::kFlagMask; }
  static std::size_t blockBytes(void* block) { return sizeWord(block) & ~sizeword::kFlagMask; }
  static std::size_t& previousBytes(void* block) { return *(sizeword::wordOf(block) - 1); }
};

}  // namespace heapkit
