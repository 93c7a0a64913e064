// ReapHeap: a reap (Berger, Zorn and McKinley, "Reconsidering Custom Memory Allocation",
// OOPSLA 2002): region speed while objects are not freed, and the footprint of a
// general-purpose allocator when they are.
//
//  - Region mode: objects are bumped out of a ZoneHeap (chunks of 8 KiB, 16 KiB, ...,
//    exactly the region's growth) with an 8-byte header each, so that an object's size
//    is known if it is freed. Nothing else happens per object: the bump is ZoneHeap's,
//    inlined, plus one compare (large object or heap mode?) and the header store; no
//    counter (bytesInUse derives from ZoneHeap's count of bumped bytes).
//  - The first free switches to heap mode, as in the paper: freed objects go to a Lea
//    heap over the reap's own chunks (LeaCoalescingHeap<ReapBoundaryTags>: approximate
//    best fit over 105 bins, splitting and coalescing), carved out of the reap's chunk (a
//    reap that never frees never pays for it). Freed neighbours merge, a bigger block is
//    split for a smaller request, and objects freed next to the bump pointer go back to
//    the unbumped space; a request no free block fits is bumped. Lea's quick lists are
//    left out: they defer coalescing to speed up frees and reuse of one size, and on the
//    server workload of bench/reap they cost more than they save.
//  - Objects over 128 KiB (Lea's mmap threshold) get a chunk of their own that goes
//    back to the parent when the object is freed.
//  - clear() frees every object at once (the Lea heap goes with the chunks); so does
//    the destructor.
//
//   ReapHeap<Parent> = ZoneHeap<Parent, 8 KiB> + 8-byte headers
//                      + LeaCoalescingHeap<ReapBoundaryTags> (from the first free on)
//
// Object layout: [header 8][object, 16-byte aligned ...]. The header holds the block's
// bytes (header included, a multiple of 16) and flags in the low four bits. Blocks are
// laid end to end, so an object's header is the last word of the block before it (the
// first object's is the chunk header's spare word): 8 bytes per object, as in Lea's
// allocator, and the same boundary tags (objectrep/BoundaryTags.h), which is what lets
// the Lea heap merge and split the reap's blocks. The Lea heap's blocks are at least 32
// bytes (a free block holds two list links and its length); the region's bump keeps
// 16-byte blocks for requests of up to 8 bytes, and such a block, freed between objects
// in use, stays a hole until clear().
//
// A chunk stays with the reap until clear(), even when all its objects are freed: its
// free space serves later requests of any size, as a general-purpose heap keeps its own.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>

#include "heapkit/core/HeapContract.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/special/ReapBoundaryTags.h"
#include "heapkit/special/ZoneHeap.h"

namespace heapkit {

namespace reap {
inline constexpr std::size_t kFirstChunkBytes = 8192;
// Lea's mmap threshold.
inline constexpr std::size_t kLargeObjectBytes = 128 * 1024;
inline constexpr std::size_t kHeaderBytes = 8;
// Header flag of objects that own their chunk (the flag BoundaryTags leaves to the layer
// that lays the blocks out).
inline constexpr std::size_t kOwnChunk = 2;
inline constexpr std::size_t kFlagMask = 15;
}  // namespace reap

template <Heap Super>
class ReapHeap : public ZoneHeap<Super, reap::kFirstChunkBytes> {
  using Zone = ZoneHeap<Super, reap::kFirstChunkBytes>;
  using Blocks = ReapBoundaryTags<ReapHeap>;
  using FreeBlocks = LeaCoalescingHeap<Blocks>;
  friend Blocks;
  static_assert(Zone::kChunkHeaderBytes % kMinAlignment == 0, "the chunk header's last word holds the first header");
  static_assert((reap::kOwnChunk & (BoundaryTags::kFree | BoundaryTags::kPreviousFree)) == 0);

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  // The word before an object is its block size, not its usable size (core/SizeWord.h).
  static constexpr bool KeepsSizeWord = false;
  static constexpr std::size_t kHeaderBytes = reap::kHeaderBytes;

  using Zone::Zone;
  ReapHeap() = default;
  ReapHeap(const ReapHeap&) = delete;
  ReapHeap& operator=(const ReapHeap&) = delete;

  void* malloc(std::size_t size) {
    if (size >= offBumpPathFrom_) [[unlikely]] {
      if (size >= kLargeFrom) return mallocLarge(size);
      return mallocInHeapMode(size);
    }
    return bumpObject(blockBytesFor(size));
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t header = headerOf(object);
    std::size_t bytes = header & ~reap::kFlagMask;
    if (header & reap::kOwnChunk) {
      largeBytes_ -= bytes;
      Zone::freeOwnChunk(object);
      return;
    }
    idleBytes_ += bytes;
    if (freeBlocks_ == nullptr && !enterHeapMode()) return;
    // A 16-byte block has no room for the links of a free block: unless it merges with a
    // neighbour, it stays a hole until clear().
    if (bytes < Blocks::kMinBlockBytes && !freeBlocks_->mergesWhenFreed(object)) return;
    freeBlocks_->free(object);
  }

  std::size_t getSize(void* object) const { return blockBytesOf(object) - kHeaderBytes; }

  // True for objects over kLargeObjectBytes, whose memory goes back to the parent as
  // soon as they are freed (the C library's misuse checks need to know).
  static bool ownsChunk(void* object) { return (headerOf(object) & reap::kOwnChunk) != 0; }

  // Grows in place when the object is the last one bumped and its chunk has room; a
  // smaller size keeps the object where it is. nullptr (object untouched) on failure.
  void* realloc(void* object, std::size_t size) {
    if (object == nullptr) return malloc(size);
    std::size_t usable = getSize(object);
    if (size <= usable) return object;
    if (size <= reap::kLargeObjectBytes && !ownsChunk(object)) {
      std::size_t bytes = usable + kHeaderBytes;
      std::size_t wanted = blockBytesFor(size);
      if (Zone::tryExtend(static_cast<char*>(object) + bytes, wanted - bytes)) {
        headerOf(object) = wanted | (headerOf(object) & reap::kFlagMask);
        return object;
      }
    }
    void* moved = malloc(size);
    if (moved == nullptr) return nullptr;
    std::memcpy(moved, object, usable);
    free(object);
    return moved;
  }

  // Free every object at once: every chunk goes back to the parent, the Lea heap (which
  // lives in a chunk) with them.
  void clear() {
    freeBlocks_ = nullptr;
    offBumpPathFrom_ = kLargeFrom;
    Zone::clear();
    largeBytes_ = idleBytes_ = 0;
  }

  // Bytes of live objects, headers included (every bumped byte, less the free blocks,
  // plus the large objects: no counting on the bump path); chunk bytes
  // held from the parent (the reap's footprint) and their high-water mark.
  std::size_t bytesInUse() const { return Zone::bumpedBytes() - idleBytes_ + largeBytes_; }
  std::size_t footprint() const { return Zone::chunkBytes(); }
  std::size_t peakFootprint() const { return Zone::peakChunkBytes(); }
  // True once an object was freed since the last clear(): allocation then looks at the
  // free objects before bumping.
  bool inHeapMode() const { return freeBlocks_ != nullptr; }

 private:
  static std::size_t& headerOf(void* object) { return static_cast<std::size_t*>(object)[-1]; }
  static std::size_t blockBytesOf(void* object) { return headerOf(object) & ~reap::kFlagMask; }
  // Header included, a multiple of 16, at least 16 (the Lea heap rounds its requests to
  // at least 32 itself).
  static constexpr std::size_t blockBytesFor(std::size_t size) { return alignUp(size + kHeaderBytes, kMinAlignment); }

  // The region's bump, plus the header (which lands in the block before: see the top).
  void* bumpObject(std::size_t bytes) {
    if (!Zone::fitsInChunk(bytes)) return bumpObjectInNewChunk(bytes);
    void* object = Zone::bumpInChunk(bytes);
    headerOf(object) = bytes;
    return object;
  }

  // Where the blocks of a chunk stop short of its bump pointer, a fence (a size word of
  // 0, a block never free) ends them, so that a block freed there never merges with what
  // follows: in the chunk being left, and after an object that got a chunk of its own.
  [[gnu::noinline]] void* bumpObjectInNewChunk(std::size_t bytes) {
    if (char* end = Zone::bumpPointer()) headerOf(end) = 0;
    char* object = static_cast<char*>(Zone::bump(bytes));
    if (object == nullptr) return nullptr;
    headerOf(object) = bytes;
    if (object + bytes != Zone::bumpPointer()) headerOf(object + bytes) = 0;
    return object;
  }

  void* mallocInHeapMode(std::size_t size) {
    void* object = freeBlocks_->malloc(size);
    if (object != nullptr) idleBytes_ -= blockBytesOf(object);
    return object;
  }

  // For the Lea heap (ReapBoundaryTags): a fresh block, counted as idle until
  // mallocInHeapMode hands it out like a reused one.
  void* bumpBlock(std::size_t bytes) {
    void* block = bumpObject(bytes);
    if (block != nullptr) idleBytes_ += bytes;
    return block;
  }
  // Free blocks from `block` to the bump pointer go back to the unbumped space.
  void unbump(void* block) {
    idleBytes_ -= static_cast<std::size_t>(Zone::bumpPointer() - static_cast<char*>(block));
    Zone::retreatTo(block);
  }

  // The Lea heap, carved out of the current chunk as an object that is never freed. If
  // the parent has no memory for it the object is not reused (it is still freed by
  // clear()), as in a region.
  bool enterHeapMode() {
    static_assert(alignof(FreeBlocks) <= kMinAlignment);
    std::size_t bytes = blockBytesFor(sizeof(FreeBlocks));
    void* place = bumpObject(bytes);
    if (place == nullptr) return false;
    idleBytes_ += bytes;  // not an object
    freeBlocks_ = ::new (place) FreeBlocks(this);
    offBumpPathFrom_ = 0;
    return true;
  }

  [[gnu::noinline]] void* mallocLarge(std::size_t size) {
    if (!fitsAfterAlignUp(size, kHeaderBytes + Zone::kChunkHeaderBytes, kMinAlignment)) return nullptr;
    std::size_t bytes = blockBytesFor(size);
    void* object = Zone::mallocOwnChunk(bytes);
    if (object == nullptr) return nullptr;
    headerOf(object) = bytes | reap::kOwnChunk;
    largeBytes_ += bytes;
    return object;
  }

  static constexpr std::size_t kLargeFrom = reap::kLargeObjectBytes + 1;

  // Requests of this size or more leave the bump path: large objects always, and every
  // size in heap mode. One compare on the bump path tests both.
  std::size_t offBumpPathFrom_ = kLargeFrom;
  FreeBlocks* freeBlocks_ = nullptr;
  std::size_t idleBytes_ = 0;   // bumped, but free (or the Lea heap itself)
  std::size_t largeBytes_ = 0;  // of live large objects
};

}  // namespace heapkit
