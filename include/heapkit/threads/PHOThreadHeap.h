// PHOThreadHeap: private heaps with ownership (Berger's "PHOThreadHeap"). Threads are
// spread over NumHeaps thread-safe heaps as in ThreadHeap, but every object remembers the
// heap that allocated it and goes back there whoever frees it, so memory never migrates
// between heaps and any heap (coalescing ones included) can be used.
//
// The owner costs a 16-byte header: [owner index][size word][object...]. The size word
// keeps the size-word convention, so layers above (HybridHeap, ANSIWrapper) still work.
// The scalable composition (ScalableHeap) keeps ownership per superblock instead, free.
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/threads/HeapArray.h"
#include "heapkit/threads/Locks.h"

namespace heapkit {

template <std::size_t NumHeaps, SizedHeap PerThreadHeap>
class PHOThreadHeap : public HeapArray<NumHeaps, PerThreadHeap> {
  using HeapArray<NumHeaps, PerThreadHeap>::heaps_;
  static constexpr std::size_t kHeaderBytes = 16;

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, kHeaderBytes, kMinAlignment)) return nullptr;
    std::size_t owner = threadIndex() % NumHeaps;
    // Asked for whole 16-byte units: the usable size, rounded down to one for the size
    // word, still covers the request whatever granularity the heap below has.
    auto* block = static_cast<std::size_t*>(heaps_[owner].malloc(alignUp(size, kMinAlignment) + kHeaderBytes));
    if (block == nullptr) return nullptr;
    std::size_t usable = (heaps_[owner].getSize(block) - kHeaderBytes) & ~sizeword::kFlagMask;
    block[0] = owner;
    void* object = block + 2;
    sizeword::set(object, usable);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t* block = static_cast<std::size_t*>(object) - 2;
    heaps_[block[0]].free(block);
  }

  std::size_t getSize(void* object) const { return sizeword::size(object); }

  // Which heap owns an object (for tests and diagnostics).
  static std::size_t ownerOf(void* object) { return (static_cast<std::size_t*>(object) - 2)[0]; }
};

}  // namespace heapkit
