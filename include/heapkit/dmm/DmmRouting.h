// DmmRouting: the routing of a DMM design, written once for DmmHeap (its allocators chosen
// from a spec's values at run time) and StaticDmmHeap (its allocators as types, the form
// `heapkit emit` writes). It owns the shared arena and the OS fallback; a request goes to
// the first allocator whose range holds its size (one step per range compared), a free to
// the allocator whose arena extent holds the pointer (the owner's byte read, one step).
// A design that places by lifetime looks its short-lived set up first (one step): a size
// in it goes to the short-lived area, whatever range holds it.
//
// The Allocators policy holds the design's allocators, built over the arena:
//   Allocators(Arena&, args...)        builds allocator i as owner i + 1
//   kMaxCount                          the most allocators it can hold (a constant)
//   std::size_t count()                how many
//   std::size_t maxInclusive(i)        the largest request allocator i serves
//   int fallback()                     where requests above every range go: an index, or
//                                      kFallbackToOs
//   bool hasShortLived()               the design places short-lived sizes apart
//                                      (dmm/ShortLivedSizes.h): allocator count() + 1,
//                                      owner count() + 2, is their area
//   bool isShortLived(size)            a request of this size goes there
//   visit(i, f)                        f(allocator i), returning what f returns (i up to
//                                      count() + 1 when there is a short-lived area)
//   release()                          every allocator gives its memory back (before the
//                                      arena unmaps)
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "heapkit/core/AlignedObjects.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/top/ArenaHeap.h"

namespace heapkit {

inline constexpr int kFallbackToOs = -1;

// Aligned objects in allocators that keep size words: ANSIWrapper's layout
// (core/AlignedObjects.h).
namespace dmmalign {
inline void* tag(void* base, std::size_t alignment) {
  return base == nullptr ? nullptr : alignedobjects::alignWithin(base, alignment);
}
using alignedobjects::realObject;
template <class H>
std::size_t sizeIn(H& heap, void* object) {
  void* real = realObject(object);
  return heap.getSize(real) - static_cast<std::size_t>(static_cast<char*>(object) - static_cast<char*>(real));
}
// An allocator that aligns objects itself (page_segregated's, which has no size words).
template <class H>
inline constexpr bool alignsItself = requires(H& heap, std::size_t n) {
  { heap.memalign(n, n) } -> std::same_as<void*>;
};
}  // namespace dmmalign

// What one allocator of a design served: the DMM map's figures.
struct AllocatorUsage {
  std::uint64_t requests = 0;
  std::uint64_t requestedBytes = 0;
};

template <class Memory, class Allocators>
class DmmRouting {
 public:
  using Arena = ReservedArena<Memory>;
  using Top = ArenaHeap<Arena>;

  static constexpr std::size_t Alignment = kMinAlignment;
  // No: page_segregated's objects have no size word (memalign is the routing's own instead).
  static constexpr bool KeepsSizeWord = false;
  static constexpr bool SimulatesData = Memory::kSimulatesData;
  static constexpr std::uint8_t kFallbackOwner = 255;

  template <class... Args>
  explicit DmmRouting(std::size_t reserveBytes, Args&&... args)
      : arena_(reserveBytes), fallbackHeap_(arena_, kFallbackOwner), allocators_(arena_, static_cast<Args&&>(args)...) {}
  DmmRouting(const DmmRouting&) = delete;
  DmmRouting& operator=(const DmmRouting&) = delete;
  ~DmmRouting() { allocators_.release(); }

  void* malloc(std::size_t size) {
    std::size_t index = allocatorFor(size);
    if constexpr (Memory::kCounts) {
      usage_[index].requests += 1;
      usage_[index].requestedBytes += size;
    }
    if (index == allocators_.count()) return fallbackHeap_.malloc(size);
    return allocators_.visit(index, [size](auto& heap) -> void* { return heap.malloc(size); });
  }

  // Aligned objects (docs/dmm-spec.md): routed by the padded size, size + alignment - 16,
  // as ANSIWrapper over-allocates over heaps of size words. An allocator that aligns by
  // itself (page_segregated's, without size words) does; the others get the padded
  // object, and the word before the aligned pointer holds its offset, tagged.
  void* memalign(std::size_t alignment, std::size_t size) {
    if (alignment <= kMinAlignment) return malloc(size);
    if (size > SIZE_MAX / 2 - alignment) return nullptr;
    std::size_t padded = size + alignment - kMinAlignment;
    std::size_t index = allocatorFor(padded);
    if constexpr (Memory::kCounts) {
      usage_[index].requests += 1;
      usage_[index].requestedBytes += padded;
    }
    if (index == allocators_.count()) return dmmalign::tag(fallbackHeap_.malloc(padded), alignment);
    return allocators_.visit(index, [alignment, size, padded](auto& heap) -> void* {
      if constexpr (dmmalign::alignsItself<std::remove_cvref_t<decltype(heap)>>) return heap.memalign(alignment, size);
      else return dmmalign::tag(heap.malloc(padded), alignment);
    });
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::uint8_t owner = arena_.ownerOf(*this, object);
    countStep(*this);  // the owner looked up
    if (owner == kFallbackOwner) return fallbackHeap_.free(dmmalign::realObject(object));
    allocators_.visit(owner - 1, [object](auto& heap) {
      if constexpr (dmmalign::alignsItself<std::remove_cvref_t<decltype(heap)>>) heap.free(object);
      else heap.free(dmmalign::realObject(object));
    });
  }

  // Inside an extent of the arena that an allocator or the fallback holds (HardenedHeap
  // refuses other pointers: free would index the allocators with no owner).
  bool owns(const void* object) const { return arena_.ownerOf(object) != Arena::kNoOwner; }

  std::size_t getSize(void* object) {
    std::uint8_t owner = arena_.ownerOf(object);
    if (owner == kFallbackOwner) return dmmalign::sizeIn(fallbackHeap_, object);
    return allocators_.visit(owner - 1, [object](auto& heap) -> std::size_t {
      if constexpr (dmmalign::alignsItself<std::remove_cvref_t<decltype(heap)>>) return heap.getSize(object);
      else return dmmalign::sizeIn(heap, object);
    });
  }

  // calloc's clearing (wrapper/ANSIWrapper.h): the bytes of an object just handed out
  // that may hold old data, as its allocator tells (page_segregated's spans read as zero
  // where never touched or purged), else all of them. Not counted (nor is the memset).
  std::size_t bytesToClear(void* object, std::size_t bytes) {
    std::uint8_t owner = arena_.ownerOf(object);
    if (owner == kFallbackOwner) return bytes;
    return allocators_.visit(owner - 1, [object, bytes](auto& heap) -> std::size_t {
      if constexpr (ClearsOnlyOldDataHeap<std::remove_cvref_t<decltype(heap)>>)
        return heap.bytesToClear(object, bytes);
      else return bytes;
    });
  }

  // A design whose allocator gives each thread its heap (a thread-aware page_segregated
  // one): the caller names the thread whose calls follow (a trace's thread index; 0 until
  // named). Other designs have one heap for every thread.
  bool perThreadHeaps() {
    bool any = false;
    for (std::size_t i = 0; i < allocators_.count(); ++i)
      any |= allocators_.visit(i, [](auto& heap) -> bool { return requires { heap.selectThread(0u); }; });
    return any;
  }
  void selectThread(std::uint32_t thread) {
    for (std::size_t i = 0; i < allocators_.count(); ++i)
      allocators_.visit(i, [thread](auto& heap) {
        if constexpr (requires { heap.selectThread(thread); }) heap.selectThread(thread);
      });
  }

  std::size_t bytesHeld() const { return arena_.bytesHeld(); }
  std::size_t peakBytesHeld() const { return arena_.peakBytesHeld(); }
  // Bytes held less the pages purged: the footprint (equal to bytes held unless a layer purges).
  std::size_t residentBytes() const { return arena_.residentBytes(); }
  std::size_t peakResidentBytes() const { return arena_.peakResidentBytes(); }
  // What allocator i holds now and at its own peak (i == count(): the OS fallback;
  // count() + 1: the short-lived area, when hasShortLived()).
  std::size_t bytesHeldBy(std::size_t i) {
    if (i == count()) return fallbackHeap_.bytesHeld();
    return allocators_.visit(i, [](auto& heap) -> std::size_t { return heap.bytesHeld(); });
  }
  std::size_t peakBytesHeldBy(std::size_t i) {
    if (i == count()) return fallbackHeap_.peakBytesHeld();
    return allocators_.visit(i, [](auto& heap) -> std::size_t { return heap.peakBytesHeld(); });
  }
  // Requests each allocator served (counted over counting memory); index count() is the
  // OS fallback, count() + 1 the short-lived area.
  const AllocatorUsage& usage(std::size_t i) const { return usage_[i]; }
  std::size_t count() const { return allocators_.count(); }
  bool hasShortLived() const { return allocators_.hasShortLived(); }
  const Arena& arena() const { return arena_; }

  WorkCounts& workCounts()
    requires Memory::kCounts
  {
    return arena_.workCounts();
  }

 private:
  std::size_t allocatorFor(std::size_t size) {
    if (allocators_.hasShortLived()) {
      countStep(*this);  // the short-lived set looked up
      if (allocators_.isShortLived(size)) return allocators_.count() + 1;
    }
    for (std::size_t i = 0; i < allocators_.count(); ++i) {
      countStep(*this);  // a range compared
      if (size <= allocators_.maxInclusive(i)) return i;
    }
    int fallback = allocators_.fallback();
    return fallback == kFallbackToOs ? allocators_.count() : static_cast<std::size_t>(fallback);
  }

  Arena arena_;
  Top fallbackHeap_;
  Allocators allocators_;
  AllocatorUsage usage_[Allocators::kMaxCount + 2] = {};
};

}  // namespace heapkit
