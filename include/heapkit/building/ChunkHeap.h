// ChunkHeap: carves objects out of ChunkBytes-sized chunks from its parent by bumping a
// pointer. Objects are not freed one by one (free is a no-op); every chunk goes back to
// the parent when the heap is destroyed. Layers above (free lists) recycle objects.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t ChunkBytes, Heap Super>
class ChunkHeap : public Super {
  struct alignas(16) ChunkHeader {
    ChunkHeader* next;
  };
  static_assert(ChunkBytes % kMinAlignment == 0 && ChunkBytes > sizeof(ChunkHeader));

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = false;

  using Super::Super;
  ChunkHeap() = default;

  ~ChunkHeap() {
    while (chunks_ != nullptr) {
      ChunkHeader* chunk = chunks_;
      chunks_ = chunk->next;
      Super::free(chunk);
    }
  }

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, sizeof(ChunkHeader), kMinAlignment)) return nullptr;
    size = usableBytesFor(size);
    char* object = loadMetadata(*this, cursor_);
    if (size <= static_cast<std::size_t>(loadMetadata(*this, limit_) - object)) {
      storeMetadata(*this, cursor_, object + size);
      return object;
    }
    return mallocFromNewChunk(size);
  }

  void free(void*) {}

  // Objects carry no header here; put SizeHeap above for sizes.
  std::size_t getSize(void*) const = delete;

 private:
  static constexpr std::size_t kPayloadBytes = ChunkBytes - sizeof(ChunkHeader);

  // Out of line and cold: inlined, the OS call would make every malloc above save and
  // restore registers it only needs once a chunk.
  [[gnu::noinline, gnu::cold]] void* mallocFromNewChunk(std::size_t size) {
    // A request bigger than a quarter chunk gets a chunk of its own, so the room left in
    // the current chunk is not thrown away.
    if (size > kPayloadBytes / 4) return newChunk(size + sizeof(ChunkHeader));
    char* start = newChunk(ChunkBytes);
    if (start == nullptr) return nullptr;
    storeMetadata(*this, cursor_, start + size);
    storeMetadata(*this, limit_, start + kPayloadBytes);
    return start;
  }

  char* newChunk(std::size_t bytes) {
    auto* chunk = static_cast<ChunkHeader*>(Super::malloc(bytes));
    countStep(*this);  // the chunk requested
    if (chunk == nullptr) return nullptr;
    storeMetadata(*this, chunk->next, loadMetadata(*this, chunks_));
    storeMetadata(*this, chunks_, chunk);
    return reinterpret_cast<char*>(chunk + 1);
  }

  ChunkHeader* chunks_ = nullptr;
  char* cursor_ = nullptr;
  char* limit_ = nullptr;
};

}  // namespace heapkit
