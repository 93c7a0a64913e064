// XallocHeap: a stack-like heap. Objects are bumped out of chunks; freeing the most
// recent live object moves the pointer back, past every object freed before it, so
// LIFO (or nearly LIFO) lifetimes reuse memory with no free lists at all. Freeing an
// object in the middle only marks it; its space comes back once everything above it
// is freed. A chunk emptied this way goes back to the parent, but one spare is kept so
// that a push/pop sequence straddling a chunk boundary does not call the parent each time.
//
// Object: [previous object 8][size word 8][object ...]
#pragma once

#include <cstddef>

#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t ChunkBytes, Heap Super>
class XallocHeap : public Super {
  struct alignas(16) Chunk {
    Chunk* prev;
    char* limit;
  };
  struct Header {
    char* previous;  // the object allocated just before this one, or nullptr
    std::size_t sizeWord;
  };
  static constexpr std::size_t kFreed = 1;
  static_assert(ChunkBytes % kMinAlignment == 0 && ChunkBytes > sizeof(Chunk) + sizeof(Header) + 16);

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  using Super::Super;
  XallocHeap() = default;
  XallocHeap(const XallocHeap&) = delete;
  XallocHeap& operator=(const XallocHeap&) = delete;

  ~XallocHeap() {
    while (chunk_ != nullptr) popChunk();
    if (spare_ != nullptr) Super::free(spare_);
  }

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, sizeof(Chunk) + sizeof(Header), kMinAlignment)) return nullptr;
    std::size_t bytes = usableBytesFor(size) + sizeof(Header);
    if (chunk_ == nullptr || bytes > static_cast<std::size_t>(chunk_->limit - cursor_)) {
      if (!pushChunk(bytes)) return nullptr;
    }
    auto* header = reinterpret_cast<Header*>(cursor_);
    header->previous = last_;
    header->sizeWord = bytes - sizeof(Header);
    last_ = cursor_ + sizeof(Header);
    cursor_ += bytes;
    return last_;
  }

  void free(void* object) {
    if (object == nullptr) return;
    sizeword::addFlags(object, kFreed);
    // Pop every freed object from the top of the stack.
    while (last_ != nullptr && (sizeword::flags(last_) & kFreed) != 0) {
      char* start = last_ - sizeof(Header);
      last_ = headerOf(last_)->previous;
      if (start == reinterpret_cast<char*>(chunk_ + 1)) {
        popChunk();  // the chunk is empty now
        cursor_ = last_ != nullptr ? last_ + sizeword::size(last_) : nullptr;
      } else {
        cursor_ = start;
      }
    }
  }

  std::size_t getSize(void* object) const { return sizeword::size(object); }

 private:
  static Header* headerOf(char* object) { return reinterpret_cast<Header*>(object - sizeof(Header)); }

  bool pushChunk(std::size_t bytes) {
    std::size_t chunkBytes = bytes + sizeof(Chunk) > ChunkBytes ? bytes + sizeof(Chunk) : ChunkBytes;
    Chunk* chunk = nullptr;
    if (spare_ != nullptr && chunkBytes == ChunkBytes) {
      chunk = spare_;
      spare_ = nullptr;
    } else {
      chunk = static_cast<Chunk*>(Super::malloc(chunkBytes));
      if (chunk == nullptr) return false;
    }
    chunk->prev = chunk_;
    chunk->limit = reinterpret_cast<char*>(chunk) + chunkBytes;
    chunk_ = chunk;
    cursor_ = reinterpret_cast<char*>(chunk + 1);
    return true;
  }

  void popChunk() {
    Chunk* chunk = chunk_;
    chunk_ = chunk->prev;
    bool standard = chunk->limit == reinterpret_cast<char*>(chunk) + ChunkBytes;
    if (standard && spare_ == nullptr) {
      spare_ = chunk;
    } else {
      Super::free(chunk);
    }
  }

  Chunk* chunk_ = nullptr;
  Chunk* spare_ = nullptr;
  char* cursor_ = nullptr;  // next free byte in chunk_
  char* last_ = nullptr;    // the most recent object not yet popped
};

}  // namespace heapkit
