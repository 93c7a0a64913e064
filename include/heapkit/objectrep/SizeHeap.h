// SizeHeap: prepends a 16-byte header that records each object's usable size, so layers
// above can call getSize. The size sits in the word just before the object. Hardened
// (core/Hardening.h), the word before it holds a cookie (the secret mixed with the
// object's address: a load and an xor from the pointer free holds), and getSize, which every free above asks first, refuses a pointer whose cookie
// is wrong: one this heap did not hand out, or one inside an object. A free list above
// that asks getSize before every free (StrictSegHeap's bins) may keep its freed mark
// here (markFreed: the cookie's low bit flipped, one instruction on free and one on
// malloc), so that the cookie's check also stops a second free: no tag of its own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <Heap Super>
class SizeHeap : public Super {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr std::size_t kHeaderBytes = 16;

  using Super::Super;
  SizeHeap() = default;

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, kHeaderBytes, kMinAlignment)) return nullptr;
    std::size_t usable = usableBytesFor(size);
    char* block = static_cast<char*>(Super::malloc(usable + kHeaderBytes));
    if (block == nullptr) return nullptr;
    void* object = block + kHeaderBytes;
    sizeword::set(*this, object, usable);
    if constexpr (kHardened) *cookieOf(object) = hardening::tagOf(object);
    return object;
  }

  void free(void* object) {
    if (object != nullptr) Super::free(static_cast<char*>(object) - kHeaderBytes);
  }

  std::size_t getSize(void* object) const {
    if constexpr (kHardened) {
      if (*cookieOf(object) != hardening::tagOf(object)) [[unlikely]] badCookie(object);
    }
    return sizeword::size(object);
  }

  // Hardened: the freed mark of an object a free list above keeps (its getSize, asked
  // before the list's free, then reports a second free), and taken off when the list
  // hands the object out again. Only for lists that never ask getSize of a listed object.
  static void markFreed(void* object)
    requires(hardened<Super>())
  {
    // One xor on the cookie in memory: without the fence the compiler keeps the cookie
    // getSize loaded in a register for it, which costs a load and a move more.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    *cookieOf(object) ^= kFreedMark;
  }
  static void markAllocated(void* object)
    requires(hardened<Super>())
  {
    *cookieOf(object) ^= kFreedMark;
  }

 private:
  static constexpr bool kHardened = hardened<Super>();
  static constexpr std::uint64_t kFreedMark = 1;
  // Out of line, so that free compares the cookie in memory and keeps no register for it.
  [[noreturn, gnu::cold, gnu::noinline]] static void badCookie(void* object) {
    if (*cookieOf(object) == (hardening::tagOf(object) ^ kFreedMark)) hardening::doubleFree(object);
    hardening::invalidPointer(object);
  }
  static std::uint64_t* cookieOf(void* object) { return static_cast<std::uint64_t*>(object) - 2; }
};

}  // namespace heapkit
