// The size-word convention: object-representation layers store the object's size in the
// word immediately before it, as a multiple of 16, so the low four bits are free for
// flags. Most layers store the usable size; boundary tags (CoalesceableHeap) store the
// block's length, 8 more than its usable size, so the usable size of an object is always
// asked of its heap (getSize), not read from the word.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"

namespace heapkit::sizeword {

inline constexpr std::size_t kFlagMask = 15;
// Bits 0-2 belong to the object-representation layer that wrote the word; bit 3 to the
// routing layer (HybridHeap) that marks objects of its big heap.
inline constexpr std::size_t kRoutedToBigHeap = 8;

inline std::size_t* wordOf(void* object) { return static_cast<std::size_t*>(object) - 1; }

inline std::size_t size(void* object) { return *wordOf(object) & ~kFlagMask; }
inline std::size_t flags(void* object) { return *wordOf(object) & kFlagMask; }
inline void addFlags(void* object, std::size_t flags) { *wordOf(object) |= flags; }
inline void clearFlags(void* object, std::size_t flags) { *wordOf(object) &= ~flags; }
inline void set(void* object, std::size_t size, std::size_t flags = 0) { *wordOf(object) = size | flags; }

// The same, for a layer's own use of the word: counted as a metadata access over a
// counting top heap (core/Counting.h), a plain load or store otherwise.
template <class H>
inline std::size_t size(H& heap, void* object) {
  return loadMetadata(heap, *wordOf(object)) & ~kFlagMask;
}
template <class H>
inline void set(H& heap, void* object, std::size_t size, std::size_t flags = 0) {
  storeMetadata(heap, *wordOf(object), size | flags);
}
template <class H>
inline std::size_t flags(H& heap, void* object) {
  return loadMetadata(heap, *wordOf(object)) & kFlagMask;
}
template <class H>
inline void addFlags(H& heap, void* object, std::size_t flags) {
  storeMetadata(heap, *wordOf(object), loadMetadata(heap, *wordOf(object)) | flags);
}
template <class H>
inline void clearFlags(H& heap, void* object, std::size_t flags) {
  storeMetadata(heap, *wordOf(object), loadMetadata(heap, *wordOf(object)) & ~flags);
}

// An object's size asked of `parent` (the heap it came from) by a layer that reads it as
// part of its own work. Every heap that keeps a size word answers getSize from that one
// word, so this is counted as that word's load, at its address.
template <class H, class Parent>
inline std::size_t sizeFrom(H& heap, const Parent& parent, void* object) {
  if constexpr (CountingHeap<H>) heap.workCounts().read(wordOf(object));
  return parent.getSize(object);
}

}  // namespace heapkit::sizeword
