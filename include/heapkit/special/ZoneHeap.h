// ZoneHeap: a region. Objects are carved by bumping a pointer through chunks from the
// parent whose sizes grow geometrically (FirstChunkBytes, doubling up to MaxChunkBytes),
// so a region of n bytes costs O(log n) parent calls yet a small region wastes little.
// free is a no-op; clear() and the destructor give every chunk back at once.
//
// A request too big for the next chunk gets a chunk of its own ("own chunk"), so the
// room left in the current chunk is not thrown away. Own chunks can also be asked for
// and released one by one (mallocOwnChunk / freeOwnChunk): reaps use them for large
// objects, which go back to the parent as soon as they are freed.
#pragma once

#include <cstddef>

#include "heapkit/core/Footprint.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <Heap Super, std::size_t FirstChunkBytes = 8192, std::size_t MaxChunkBytes = 1024 * 1024>
class ZoneHeap : public Super {
  // 32 bytes: keeps what follows 16-byte aligned and leaves the word before the first
  // object free for a size word if a layer above wants one.
  struct alignas(16) Chunk {
    Chunk* prev;
    Chunk* next;
    std::size_t bytes;  // what the parent was asked for, header included
    std::size_t unused;
  };
  static_assert(sizeof(Chunk) == 32);
  static_assert(FirstChunkBytes % kMinAlignment == 0 && FirstChunkBytes > 2 * sizeof(Chunk));
  static_assert(MaxChunkBytes >= FirstChunkBytes);

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = false;
  static constexpr std::size_t kChunkHeaderBytes = sizeof(Chunk);

  using Super::Super;
  ZoneHeap() = default;
  ZoneHeap(const ZoneHeap&) = delete;
  ZoneHeap& operator=(const ZoneHeap&) = delete;

  ~ZoneHeap() { clear(); }

  void* malloc(std::size_t size) {
    if (size > kMaxRequest) return nullptr;
    return bump(usableBytesFor(size));
  }

  // malloc for callers that have rounded the size already (a reap, which adds its
  // header first): `bytes` is a multiple of 16, at least 16 and at most SIZE_MAX / 2.
  void* bump(std::size_t bytes) {
    if (fitsInChunk(bytes)) return bumpInChunk(bytes);
    return refill(bytes);
  }

  // The fast path of bump in two halves, for a layer that does more on it (a reap
  // writes a header, and need not test for null where bumping cannot fail).
  bool fitsInChunk(std::size_t bytes) const { return bytes <= static_cast<std::size_t>(limit_ - cursor_); }
  char* bumpInChunk(std::size_t bytes) {
    char* object = cursor_;
    cursor_ += bytes;
    return object;
  }

  // Objects die with the region.
  void free(void*) {}

  // Objects carry no size; hide the parent's getSize, which would answer for chunks.
  std::size_t getSize(void*) const = delete;

  // Give every chunk back to the parent; the next chunk is FirstChunkBytes again.
  void clear() {
    while (chunks_ != nullptr) releaseChunk(chunks_);
    cursor_ = limit_ = chunkStart_ = nullptr;
    retiredBumpedBytes_ = 0;
    nextChunkBytes_ = FirstChunkBytes;
  }

  // Grow the most recent object in place: true when `end` is where the bump pointer
  // stands and the chunk has `extra` more bytes (realloc of the last object, obstacks).
  bool tryExtend(void* end, std::size_t extra) {
    if (end != cursor_ || extra > static_cast<std::size_t>(limit_ - cursor_)) return false;
    cursor_ += alignUp(extra, kMinAlignment);  // the room is a multiple of 16, so this fits
    return true;
  }

  // Where the next object would be bumped: the end of the bumped part of the current
  // chunk (nullptr before the first chunk).
  char* bumpPointer() const { return cursor_; }
  // Take back the bytes from `start` to the bump pointer, to be bumped again: `start` lies
  // in the current chunk, at or before the bump pointer (a reap's objects freed there).
  void retreatTo(void* start) { cursor_ = static_cast<char*>(start); }

  // A chunk holding one object of `size` bytes, given back by freeOwnChunk or clear().
  void* mallocOwnChunk(std::size_t size) {
    if (size > kMaxRequest) return nullptr;
    std::size_t bytes = usableBytesFor(size) + sizeof(Chunk);
    return newChunk(bytes);
  }
  void freeOwnChunk(void* object) {
    if (object != nullptr) releaseChunk(static_cast<Chunk*>(object) - 1);
  }

  // Bytes handed out by malloc, bump and tryExtend since the last clear(), rounding
  // included (not the chunks' unused tails; not mallocOwnChunk's objects, whose owner
  // knows them). Counted when a chunk is retired, not per object, so that the bump stays
  // as short as it can be.
  std::size_t bumpedBytes() const { return retiredBumpedBytes_ + static_cast<std::size_t>(cursor_ - chunkStart_); }

  // Bytes of chunks held from the parent (headers included) and their high-water mark.
  std::size_t chunkBytes() const { return footprint_.held(); }
  std::size_t peakChunkBytes() const { return footprint_.peak(); }

 private:
  static constexpr std::size_t kMaxRequest = SIZE_MAX / 2;

  char* newChunk(std::size_t& bytes) {
    auto* chunk = static_cast<Chunk*>(Super::malloc(bytes));
    if (chunk == nullptr) return nullptr;
    if constexpr (SizedHeap<Super>) {
      // Use whatever the parent gave (a cached chunk may be larger than asked).
      std::size_t given = Super::getSize(chunk) & ~(kMinAlignment - 1);
      if (given > bytes) bytes = given;
    }
    chunk->prev = nullptr;
    chunk->next = chunks_;
    chunk->bytes = bytes;
    if (chunks_ != nullptr) chunks_->prev = chunk;
    chunks_ = chunk;
    footprint_.add(bytes);
    return reinterpret_cast<char*>(chunk + 1);
  }

  void releaseChunk(Chunk* chunk) {
    if (chunk->prev != nullptr) chunk->prev->next = chunk->next;
    else chunks_ = chunk->next;
    if (chunk->next != nullptr) chunk->next->prev = chunk->prev;
    footprint_.remove(chunk->bytes);
    Super::free(chunk);
  }

  // Slow path of malloc: the current chunk is full. Out of line, so that the bump inlines
  // into its callers whole.
  [[gnu::noinline]] char* refill(std::size_t bytes) {
    if (bytes > nextChunkBytes_ - sizeof(Chunk)) {
      std::size_t own = bytes + sizeof(Chunk);
      char* object = newChunk(own);
      if (object != nullptr) retiredBumpedBytes_ += bytes;
      return object;
    }
    std::size_t chunkBytes = nextChunkBytes_;
    char* start = newChunk(chunkBytes);
    if (start == nullptr) return nullptr;
    retiredBumpedBytes_ += static_cast<std::size_t>(cursor_ - chunkStart_);
    chunkStart_ = start;
    limit_ = start + (chunkBytes - sizeof(Chunk));
    cursor_ = start + bytes;
    if (nextChunkBytes_ < MaxChunkBytes) nextChunkBytes_ = nextChunkBytes_ * 2 > MaxChunkBytes ? MaxChunkBytes : nextChunkBytes_ * 2;
    return start;
  }

  Chunk* chunks_ = nullptr;
  char* cursor_ = nullptr;
  char* limit_ = nullptr;
  char* chunkStart_ = nullptr;  // of the chunk being bumped through
  std::size_t retiredBumpedBytes_ = 0;
  std::size_t nextChunkBytes_ = FirstChunkBytes;
  Footprint footprint_;
};

}  // namespace heapkit
