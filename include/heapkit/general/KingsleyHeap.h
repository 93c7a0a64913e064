// KingsleyHeap: Chris Kingsley's BSD allocator as a composition. Power-of-two size
// classes (16 B to 4 GiB, 29 bins), each a free list; objects are never split, merged or
// returned to the OS before the heap is destroyed. Fast, at the price of up to 2x
// internal fragmentation.
//
//   StrictSegHeap<29 classes (kingsley::Classes), FreelistHeap per class,
//                 SizeHeap<ChunkHeap<64 KiB, Top>>>
#pragma once

#include <bit>
#include <cstddef>
#include <type_traits>

#include "heapkit/building/ChunkHeap.h"
#include "heapkit/building/FreelistHeap.h"
#include "heapkit/combining/StrictSegHeap.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/objectrep/SizeHeap.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

namespace kingsley {
inline constexpr std::size_t kNumBins = 29;
inline constexpr std::size_t kChunkBytes = 64 * 1024;

// Class c serves usable sizes up to 16 << c.
constexpr std::size_t sizeToClass(std::size_t size) {
  return size <= 16 ? 0 : static_cast<std::size_t>(std::bit_width(size - 1)) - 4;
}
constexpr std::size_t classToSize(std::size_t sizeClass) { return std::size_t{16} << sizeClass; }

static_assert(sizeToClass(16) == 0 && sizeToClass(17) == 1 && sizeToClass(32) == 1 && classToSize(28) == (std::size_t{1} << 32));

using Classes = FunctionBins<kNumBins, sizeToClass, classToSize>;
}  // namespace kingsley

template <Heap Top = MmapHeap>
class KingsleyHeap
    : public StrictSegHeap<kingsley::Classes, FreelistHeap, SizeHeap<ChunkHeap<kingsley::kChunkBytes, Top>>> {
  using Base = StrictSegHeap<kingsley::Classes, FreelistHeap, SizeHeap<ChunkHeap<kingsley::kChunkBytes, Top>>>;

 public:
  using Base::Base;
  // Hardened, free asks getSize first (StrictSegHeap), which checks SizeHeap's cookie: an
  // unaligned pointer's word 16 bytes before is no cookie (core/Hardening.h).
  using FreeChecksPointers = std::conditional_t<hardened<Top>(), KingsleyHeap, void>;
};

}  // namespace heapkit
