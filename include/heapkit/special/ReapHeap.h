// ReapHeap: a reap (Berger, Zorn and McKinley, "Reconsidering Custom Memory Allocation",
// OOPSLA 2002): region speed, yet any object can be freed.
//
//  - Region mode: objects are bumped out of a ZoneHeap (chunks of 8 KiB, 16 KiB, ...)
//    with a 16-byte SizeHeap header, so each object's size is known if it is freed.
//  - A freed object goes onto a Lea-style heap built from the library's own layers:
//    segregated fits with Lea's size classes (exact 16-byte classes to 1 KiB, then four
//    per power of two), each bin a DLList; a request takes from the smallest non-empty
//    class that fits, splitting a block much larger than the request; when no class
//    has one, bumping resumes. Until the first free (region mode) allocation does not
//    even look at it.
//  - Objects over 128 KiB (Lea's mmap threshold) get a chunk of their own that goes
//    back to the parent when the object is freed.
//  - clear() frees every object at once; so does the destructor.
//
//   ReapHeap<Parent> = SegHeap<Lea classes, DLList bins,
//                        ParentRef<SizeHeap<ZoneHeap<8 KiB, Parent>>>>  (+ own chunks)
//
// Freed blocks are not coalesced: a reap's frees are few compared with its allocations,
// and its memory comes back wholesale with clear(). (Lea's quick lists are left out for
// the same reason: they exist to defer coalescing, and their consolidation on every
// larger miss would cost a reap more than it saves.)
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>

#include "heapkit/combining/SegHeap.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/objectrep/SizeHeap.h"
#include "heapkit/special/ZoneHeap.h"
#include "heapkit/utility/ParentRef.h"

namespace heapkit {

namespace reap {
inline constexpr std::size_t kFirstChunkBytes = 8192;
inline constexpr std::size_t kLargeObjectBytes = lea::kMmapThreshold;
// Split a reused block when at least this much (header included) would be left over.
inline constexpr std::size_t kMinSplitBytes = 64;
// Size-word flag (an object-representation bit) of objects that own their chunk.
inline constexpr std::size_t kOwnChunk = 2;
}  // namespace reap

template <Heap Super>
class ReapHeap : public SizeHeap<ZoneHeap<Super, reap::kFirstChunkBytes>> {
  using Zone = ZoneHeap<Super, reap::kFirstChunkBytes>;
  using Bump = SizeHeap<Zone>;
  using FreeObjects = SegHeap<lea::kNumBins, lea::sizeToClass, lea::classToMaxSize, lea::Bin, ParentRef<Bump>>;

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr std::size_t kHeaderBytes = Bump::kHeaderBytes;

  using Bump::Bump;
  ReapHeap() = default;
  ReapHeap(const ReapHeap&) = delete;
  ReapHeap& operator=(const ReapHeap&) = delete;


  void* malloc(std::size_t size) {
    if (size > reap::kLargeObjectBytes) return mallocLarge(size);
    void* object;
    if (!heapMode_) {
      object = Bump::malloc(size);  // region mode: nothing has been freed since clear()
    } else {
      object = free_.malloc(size);
      if (object != nullptr) splitExcess(object, usableBytesFor(size));
    }
    if (object != nullptr) bytesInUse_ += sizeword::size(object);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t word = *sizeword::wordOf(object);
    bytesInUse_ -= word & ~sizeword::kFlagMask;
    if (word & reap::kOwnChunk) {
      Zone::freeOwnChunk(static_cast<char*>(object) - kHeaderBytes);
      return;
    }
    heapMode_ = true;
    free_.free(object);
  }

  std::size_t getSize(void* object) const { return sizeword::size(object); }

  // Grows in place when the object is the last one bumped and its chunk has room; a
  // smaller size keeps the object where it is. nullptr (object untouched) on failure.
  void* realloc(void* object, std::size_t size) {
    if (object == nullptr) return malloc(size);
    std::size_t usable = sizeword::size(object);
    if (size <= usable) return object;
    if (!fitsAfterAlignUp(size, kHeaderBytes, kMinAlignment)) return nullptr;
    std::size_t wanted = usableBytesFor(size);
    if ((sizeword::flags(object) & reap::kOwnChunk) == 0 && wanted <= reap::kLargeObjectBytes &&
        Zone::tryExtend(static_cast<char*>(object) + usable, wanted - usable)) {
      sizeword::set(object, wanted);
      bytesInUse_ += wanted - usable;
      return object;
    }
    void* moved = malloc(size);
    if (moved == nullptr) return nullptr;
    std::memcpy(moved, object, usable);
    free(object);
    return moved;
  }

  // Free every object at once: the free-object heap goes (tearing it down hands its
  // objects to the bump layer, whose free is a no-op) and every chunk goes back to the
  // parent.
  void clear() {
    if (heapMode_) {
      std::destroy_at(&free_);
      std::construct_at(&free_, static_cast<Bump*>(this));
    }
    Zone::clear();
    heapMode_ = false;
    bytesInUse_ = 0;
  }

  // Usable bytes of live objects; chunk bytes held from the parent (the reap's
  // footprint) and their high-water mark.
  std::size_t bytesInUse() const { return bytesInUse_; }
  std::size_t footprint() const { return Zone::chunkBytes(); }
  std::size_t peakFootprint() const { return Zone::peakChunkBytes(); }
  // True once an object was freed since the last clear(): allocation then looks at the
  // free objects before bumping.
  bool inHeapMode() const { return heapMode_; }

 private:
  void* mallocLarge(std::size_t size) {
    if (!fitsAfterAlignUp(size, kHeaderBytes + Zone::kChunkHeaderBytes, kMinAlignment)) return nullptr;
    std::size_t usable = usableBytesFor(size);
    auto* block = static_cast<char*>(Zone::mallocOwnChunk(usable + kHeaderBytes));
    if (block == nullptr) return nullptr;
    void* object = block + kHeaderBytes;
    sizeword::set(object, usable, reap::kOwnChunk);
    bytesInUse_ += usable;
    return object;
  }

  // A block from the free heap may be far bigger than asked: keep what was asked and
  // free the rest as an object of its own (a header and at least 48 usable bytes).
  void splitExcess(void* object, std::size_t wanted) {
    std::size_t usable = sizeword::size(object);
    if (usable < wanted + reap::kMinSplitBytes) return;
    sizeword::set(object, wanted);
    char* rest = static_cast<char*>(object) + wanted + kHeaderBytes;
    sizeword::set(rest, usable - wanted - kHeaderBytes);
    free_.free(rest);
  }

  FreeObjects free_{static_cast<Bump*>(this)};
  std::size_t bytesInUse_ = 0;
  bool heapMode_ = false;
};

}  // namespace heapkit
