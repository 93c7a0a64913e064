// ObstackHeap: an object stack, as GNU obstacks. Objects are built by growing the
// current object (grow, grow1, blank) and sealed with finish(); alloc/copy do both at
// once. freeTo(object) frees that object and everything allocated after it. When the
// growing object outgrows its chunk it moves, whole, to a larger chunk (and the old
// chunk goes back to the parent if that object was all it held), so a finished object
// is always contiguous.
//
// The layer contract: malloc is alloc (of at least one byte; if an object is growing, the request is appended
// to it, as obstack_alloc does); free(object) pops the object if it is the last one
// finished and nothing is growing, and is otherwise a no-op: memory comes back through
// freeTo, clear or the destructor.
#pragma once

#include <cstddef>
#include <cstring>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <std::size_t ChunkBytes, Heap Super>
class ObstackHeap : public Super {
  struct alignas(16) Chunk {
    Chunk* prev;
    char* limit;
  };
  static_assert(ChunkBytes % kMinAlignment == 0 && ChunkBytes > 2 * sizeof(Chunk));

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = false;

  using Super::Super;
  ObstackHeap() = default;
  ObstackHeap(const ObstackHeap&) = delete;
  ObstackHeap& operator=(const ObstackHeap&) = delete;

  ~ObstackHeap() { clear(); }

  // --- the growing object
  void* base() const { return base_; }
  void* nextFree() const { return next_; }
  std::size_t objectSize() const { return static_cast<std::size_t>(next_ - base_); }
  std::size_t room() const { return static_cast<std::size_t>(limit_ - next_); }

  // Add `size` uninitialised bytes to the growing object; false when the parent fails
  // (the object is then unchanged).
  bool blank(std::size_t size) {
    if (!makeRoom(size)) return false;
    next_ += size;
    return true;
  }
  bool grow(const void* data, std::size_t size) {
    if (!makeRoom(size)) return false;
    if (size != 0) std::memcpy(next_, data, size);
    next_ += size;
    return true;
  }
  bool grow0(const void* data, std::size_t size) {
    if (size == SIZE_MAX || !makeRoom(size + 1)) return false;
    if (size != 0) std::memcpy(next_, data, size);
    next_[size] = '\0';
    next_ += size + 1;
    return true;
  }
  bool grow1(char c) {
    if (!makeRoom(1)) return false;
    *next_++ = c;
    return true;
  }

  // Seal the growing object and return it; the next object starts aligned after it.
  // nullptr only when the obstack holds no chunk and the parent will not give one.
  void* finish() {
    if (chunk_ == nullptr && !makeRoom(1)) return nullptr;  // even an empty object has an address
    char* object = base_;
    if (next_ == object) maybeEmptyObject_ = true;
    std::size_t room = static_cast<std::size_t>(limit_ - next_);
    std::size_t pad = alignUp(reinterpret_cast<std::uintptr_t>(next_), kMinAlignment) - reinterpret_cast<std::uintptr_t>(next_);
    next_ += pad < room ? pad : room;
    base_ = next_;
    last_ = object;
    return object;
  }

  void* alloc(std::size_t size) { return blank(size) ? finish() : nullptr; }
  void* copy(const void* data, std::size_t size) { return grow(data, size) ? finish() : nullptr; }
  void* copy0(const void* data, std::size_t size) { return grow0(data, size) ? finish() : nullptr; }

  // Free `object` and everything allocated after it (any growing object too); the
  // obstack then grows its next object where `object` was. False, with nothing freed,
  // when `object` lies in no chunk of this obstack.
  bool freeTo(void* object) {
    char* target = static_cast<char*>(object);
    Chunk* chunk = chunk_;
    while (chunk != nullptr && !(reinterpret_cast<char*>(chunk) < target && target <= chunk->limit)) chunk = chunk->prev;
    if (chunk == nullptr) return false;
    while (chunk_ != chunk) popChunk();
    base_ = next_ = target;
    limit_ = chunk->limit;
    last_ = nullptr;
    maybeEmptyObject_ = true;  // objects may still start at the chunk's first byte
    return true;
  }

  // Free every object; the obstack stays usable.
  void clear() {
    while (chunk_ != nullptr) popChunk();
    base_ = next_ = limit_ = nullptr;
    last_ = nullptr;
  }

  // Distinct objects have distinct addresses, so malloc(0) takes a byte (alloc(0) does not).
  void* malloc(std::size_t size) { return alloc(size == 0 ? 1 : size); }

  // Objects carry no size; hide the parent's getSize, which would answer for chunks.
  std::size_t getSize(void*) const = delete;

  void free(void* object) {
    if (object != nullptr && object == last_ && base_ == next_) {
      // Nothing was allocated after it: the next object starts where it did.
      base_ = next_ = last_;
      last_ = nullptr;
    }
  }

 private:
  void popChunk() {
    Chunk* chunk = chunk_;
    chunk_ = chunk->prev;
    Super::free(chunk);
  }

  // Ensure `size` more bytes fit after next_, moving the growing object to a new chunk
  // if they do not.
  bool makeRoom(std::size_t size) {
    if (size <= static_cast<std::size_t>(limit_ - next_)) return true;
    std::size_t objectBytes = objectSize();
    if (!fitsAfterAlignUp(size, objectBytes + (objectBytes >> 3) + 2 * sizeof(Chunk) + 128, kMinAlignment)) return false;
    // Leave slack (1/8 of the object, as glibc does) so a growing object does not move
    // at every step.
    std::size_t bytes = alignUp(sizeof(Chunk) + objectBytes + size + (objectBytes >> 3) + 100, kMinAlignment);
    if (bytes < ChunkBytes) bytes = ChunkBytes;
    auto* chunk = static_cast<Chunk*>(Super::malloc(bytes));
    if (chunk == nullptr) return false;
    char* start = reinterpret_cast<char*>(chunk + 1);
    if (objectBytes != 0) std::memcpy(start, base_, objectBytes);
    Chunk* old = chunk_;
    chunk->limit = reinterpret_cast<char*>(chunk) + bytes;
    chunk->prev = old;
    // The moved object was all its old chunk held: give that chunk back.
    if (old != nullptr && base_ == reinterpret_cast<char*>(old + 1) && !maybeEmptyObject_) {
      chunk->prev = old->prev;
      Super::free(old);
    }
    chunk_ = chunk;
    base_ = start;
    next_ = start + objectBytes;
    limit_ = chunk->limit;
    maybeEmptyObject_ = false;
    return true;
  }

  Chunk* chunk_ = nullptr;
  char* base_ = nullptr;   // start of the growing object
  char* next_ = nullptr;   // its end
  char* limit_ = nullptr;  // end of the current chunk
  char* last_ = nullptr;   // the last object finished, for free()
  // An empty object may have been finished at the start of the current chunk, so the
  // chunk must stay even if the growing object, which starts there too, moves away.
  bool maybeEmptyObject_ = false;
};

}  // namespace heapkit
