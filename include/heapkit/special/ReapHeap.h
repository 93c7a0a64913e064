// ReapHeap: a reap (Berger, Zorn and McKinley, "Reconsidering Custom Memory Allocation",
// OOPSLA 2002): region speed, yet any object can be freed.
//
//  - Region mode: objects are bumped out of a ZoneHeap (chunks of 8 KiB, 16 KiB, ...,
//    exactly the region's growth) with an 8-byte header each, so that an object's size
//    is known if it is freed. Nothing else happens per object: the bump is ZoneHeap's,
//    inlined, plus one compare (large object or heap mode?) and the header store; no
//    counter (bytesInUse derives from ZoneHeap's count of bumped bytes).
//  - The first free switches to heap mode: the reap carves its free lists out of its
//    own chunk (a reap that never frees never pays for them) and freed objects go there,
//    segregated by size (16-byte classes below 512 bytes, then four per power of two).
//    A request takes a block from the smallest non-empty class that fits, splitting one
//    much larger than asked; when none fits, bumping resumes.
//  - Objects over 128 KiB (Lea's mmap threshold) get a chunk of their own that goes
//    back to the parent when the object is freed.
//  - clear() frees every object at once (the free lists go with the chunks); so does
//    the destructor.
//
//   ReapHeap<Parent> = ZoneHeap<Parent, 8 KiB> + 8-byte headers
//                      + SegregatedFreeLists (from the first free on)
//
// Object layout: [header 8][object, 16-byte aligned ...]. The header holds the block's
// bytes (header included, a multiple of 16) and flags in the low four bits. Blocks are
// laid end to end, so an object's header is the last word of the block before it (the
// first object's is the chunk header's spare word): 8 bytes per object, as in Lea's
// allocator, instead of the 16 a size header costs when it keeps the object aligned.
//
// Freed blocks are not coalesced: a reap's frees are few compared with its allocations,
// and its memory comes back wholesale with clear(). (Lea's quick lists are left out for
// the same reason: they exist to defer coalescing.)
#pragma once

#include <cstddef>
#include <cstring>
#include <new>

#include "heapkit/core/HeapContract.h"
#include "heapkit/special/SegregatedFreeLists.h"
#include "heapkit/special/ZoneHeap.h"

namespace heapkit {

namespace reap {
inline constexpr std::size_t kFirstChunkBytes = 8192;
// Lea's mmap threshold.
inline constexpr std::size_t kLargeObjectBytes = 128 * 1024;
inline constexpr std::size_t kHeaderBytes = 8;
// Split a reused block when at least this much (header included) would be left over.
inline constexpr std::size_t kMinSplitBytes = 64;
// Header flag of objects that own their chunk.
inline constexpr std::size_t kOwnChunk = 2;
inline constexpr std::size_t kFlagMask = 15;
}  // namespace reap

template <Heap Super>
class ReapHeap : public ZoneHeap<Super, reap::kFirstChunkBytes> {
  using Zone = ZoneHeap<Super, reap::kFirstChunkBytes>;
  using FreeBlocks = SegregatedFreeLists;
  static_assert(Zone::kChunkHeaderBytes % kMinAlignment == 0, "the chunk header's last word holds the first header");
  static_assert(reap::kLargeObjectBytes + 16 < FreeBlocks::kMaxBlockBytes, "every block that can be freed has a class");

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
      return mallocInHeapMode(blockBytesFor(size));
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
    freeBlocks_->put(object, bytes);
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
        headerOf(object) = wanted;
        return object;
      }
    }
    void* moved = malloc(size);
    if (moved == nullptr) return nullptr;
    std::memcpy(moved, object, usable);
    free(object);
    return moved;
  }

  // Free every object at once: every chunk goes back to the parent, the free lists
  // (which live in a chunk) with them.
  void clear() {
    freeBlocks_ = nullptr;
    offBumpPathFrom_ = kLargeFrom;
    Zone::clear();
    largeBytes_ = idleBytes_ = 0;
  }

  // Bytes of live objects, headers included (every bumped byte, less what sits in the
  // free lists, plus the large objects: no counting on the bump path); chunk bytes
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
  // Header included, a multiple of 16; at least 16, so a free block holds its link.
  static constexpr std::size_t blockBytesFor(std::size_t size) { return alignUp(size + kHeaderBytes, kMinAlignment); }

  // The region's bump, plus the header (which lands in the block before: see the top).
  void* bumpObject(std::size_t bytes) {
    if (!Zone::fitsInChunk(bytes)) return bumpObjectInNewChunk(bytes);
    void* object = Zone::bumpInChunk(bytes);
    headerOf(object) = bytes;
    return object;
  }

  [[gnu::noinline]] void* bumpObjectInNewChunk(std::size_t bytes) {
    void* object = Zone::bump(bytes);
    if (object != nullptr) headerOf(object) = bytes;
    return object;
  }

  void* mallocInHeapMode(std::size_t bytes) {
    void* object = freeBlocks_->take(bytes);
    if (object == nullptr) return bumpObject(bytes);
    std::size_t have = blockBytesOf(object);
    // Keep what was asked and free the rest as a block of its own.
    if (have - bytes >= reap::kMinSplitBytes) {
      headerOf(object) = bytes;
      void* rest = static_cast<char*>(object) + bytes;
      headerOf(rest) = have - bytes;
      freeBlocks_->put(rest, have - bytes);
      have = bytes;
    }
    idleBytes_ -= have;
    return object;
  }

  // The free lists, carved out of the current chunk as an object that is never freed.
  // If the parent has no memory for them the object is not reused (it is still freed
  // by clear()), as in a region.
  bool enterHeapMode() {
    std::size_t bytes = blockBytesFor(sizeof(FreeBlocks));
    void* lists = Zone::bump(bytes);
    if (lists == nullptr) return false;
    idleBytes_ += bytes;  // not an object
    freeBlocks_ = ::new (lists) FreeBlocks();
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
  std::size_t idleBytes_ = 0;   // bumped, but free (or the free lists themselves)
  std::size_t largeBytes_ = 0;  // of live large objects
};

}  // namespace heapkit
