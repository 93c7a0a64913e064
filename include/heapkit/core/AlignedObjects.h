// Aligned objects inside bigger ones, over heaps that keep size words: the layout
// ANSIWrapper gives memalign over such heaps, which the DMM routing shares. The heap hands
// out an object `alignment - 16` bytes longer than asked; the word before the aligned
// pointer holds its offset from the object with the top bit set, which no size word has.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit::alignedobjects {

inline constexpr std::size_t kAlignedTag = std::size_t{1} << (sizeof(std::size_t) * 8 - 1);

// The first address of `base` aligned to `alignment`, its offset tagged when it is not base.
inline void* alignWithin(void* base, std::size_t alignment) {
  auto address = reinterpret_cast<std::uintptr_t>(base);
  std::uintptr_t aligned = alignUp(address, alignment);
  if (aligned == address) return base;
  // At least 16 bytes in, so the tag word lies inside the real object.
  *sizeword::wordOf(reinterpret_cast<void*>(aligned)) = kAlignedTag | (aligned - address);
  return reinterpret_cast<void*>(aligned);
}

// The object an aligned pointer lies in (the pointer itself when it is not tagged).
inline void* realObject(void* object) {
  std::size_t word = *sizeword::wordOf(object);
  if (word & kAlignedTag) return static_cast<char*>(object) - (word & ~kAlignedTag);
  return object;
}

}  // namespace heapkit::alignedobjects
