// CanaryHeap: canaries around every object, checked when it is freed (the secure tier,
// libheapkit-secure.so; as mimalloc's secure mode pads blocks, and Scudo checks a header
// checksum). Each object of `size` bytes is laid out in a block of the heap below as
//
//   [ ... | size word | canary ][ the program's size bytes ][ trailer, 8 bytes ][ slack ]
//                               ^ the pointer handed out
//
// The size word holds the requested size and the pointer's offset from the block's start
// (memalign); the canary before the pointer is the secret mixed with the pointer and the
// size word, the trailer the canary turned around. A free checks both: a write of a byte
// or more before the object (underflow), or after its requested size (overflow), a
// pointer that was never handed out, and a second free are each reported with one line
// naming the pointer. The canary word becomes a freed mark (or, for a 16-byte offset,
// the free list's own tag of the block below: the heap's freedTag, else core/Hardening.h's),
// which the second free of the same pointer finds.
//
// HardenedHeap puts this layer under ANSIWrapper when the composition's top is
// Secure<Top> (core/Hardening.h); over any other top it is not there at all.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <Heap Super>
class CanaryHeap : public Super {
  static constexpr std::size_t kHeaderBytes = 2 * sizeof(std::uint64_t);  // size word and canary
  static constexpr std::size_t kTrailerBytes = sizeof(std::uint64_t);
  static constexpr unsigned kOffsetShift = 40;  // requests up to 1 TiB; offsets in 16-byte units above
  static constexpr std::uint64_t kSizeMask = (std::uint64_t{1} << kOffsetShift) - 1;
  static constexpr std::size_t kMaxAlignment = std::size_t{1} << 27;  // 2^24 units of 16 bytes
  static constexpr std::uint64_t kFreedMark = 0x66726565642e2e21u;

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static_assert(Super::Alignment >= kMinAlignment);

  using Super::Super;
  CanaryHeap() = default;

  void* malloc(std::size_t size) {
    if (size > kSizeMask) return nullptr;
    auto* block = static_cast<char*>(Super::malloc(size + kHeaderBytes + kTrailerBytes));
    if (block == nullptr) return nullptr;
    return arm(block + kHeaderBytes, size, kHeaderBytes);
  }

  // A block alignment bytes longer holds an aligned pointer with its header before it.
  void* memalign(std::size_t alignment, std::size_t size) {
    if (!isPowerOfTwo(alignment)) return nullptr;
    if (alignment <= kMinAlignment) return malloc(size);
    if (size > kSizeMask || alignment > kMaxAlignment) return nullptr;
    auto* block = static_cast<char*>(Super::malloc(size + alignment + kTrailerBytes));
    if (block == nullptr) return nullptr;
    auto* object = reinterpret_cast<char*>(alignUp(reinterpret_cast<std::uintptr_t>(block) + kHeaderBytes, alignment));
    return arm(object, size, static_cast<std::size_t>(object - block));
  }

  void free(void* pointer) {
    if (pointer == nullptr) return;
    auto* object = static_cast<char*>(pointer);
    std::uint64_t sizeWord = wordAt(object - kHeaderBytes);
    std::uint64_t canary = wordAt(object - sizeof(std::uint64_t));
    std::uint64_t expected = canaryOf(object, sizeWord);
    if (canary != expected) [[unlikely]] {
      // Freed already: the mark this layer left (the size word is still there when the
      // block below keeps its first words), or the tag the free list below wrote into
      // its block's second word, which is this canary's word at a 16-byte offset.
      if (canary == (expected ^ kFreedMark) || canary == freedTagBelow(object - kHeaderBytes))
        return hardening::reportDoubleFree(object);
      return hardening::reportBadHeader(object);
    }
    std::size_t size = sizeWord & kSizeMask;
    if (wordAt(object + size) != trailerOf(canary)) [[unlikely]] return hardening::reportOverflowAfter(object);
    setWordAt(object - sizeof(std::uint64_t), canary ^ kFreedMark);
    Super::free(object - offsetOf(sizeWord));
  }

  // The requested size: the bytes after it are the trailer's.
  std::size_t getSize(void* pointer) { return wordAt(static_cast<char*>(pointer) - kHeaderBytes) & kSizeMask; }

 private:
  void* arm(char* object, std::size_t size, std::size_t offset) {
    std::uint64_t sizeWord = size | (static_cast<std::uint64_t>(offset / kMinAlignment) << kOffsetShift);
    std::uint64_t canary = canaryOf(object, sizeWord);
    setWordAt(object - kHeaderBytes, sizeWord);
    setWordAt(object - sizeof(std::uint64_t), canary);
    setWordAt(object + size, trailerOf(canary));
    return object;
  }

  // The tag the heap below writes into the second word of a block it frees: its own
  // (ScalableHeap's, building/Superblock.h), or core/Hardening.h's.
  static std::uint64_t freedTagBelow(const char* block) {
    if constexpr (requires { Super::freedTag(block); }) return Super::freedTag(block);
    else return hardening::freedTag(block);
  }

  static std::size_t offsetOf(std::uint64_t sizeWord) { return (sizeWord >> kOffsetShift) * kMinAlignment; }
  static std::uint64_t canaryOf(const char* object, std::uint64_t sizeWord) {
    return hardening::tagOf(object) ^ (sizeWord * 0x9e3779b97f4a7c15u);
  }
  // Not the canary itself: a trailer copied from the word before the object does not match.
  static std::uint64_t trailerOf(std::uint64_t canary) { return std::rotl(canary, 29) ^ 0x5bd1e9955bd1e995u; }

  // The trailer is unaligned (it starts at the requested size): a byte copy the compiler
  // turns into one move (the builtin: the preload libraries build with -fno-builtin).
  static std::uint64_t wordAt(const char* where) {
    std::uint64_t word;
    __builtin_memcpy(&word, where, sizeof word);
    return word;
  }
  static void setWordAt(char* where, std::uint64_t word) { __builtin_memcpy(where, &word, sizeof word); }
};

}  // namespace heapkit
