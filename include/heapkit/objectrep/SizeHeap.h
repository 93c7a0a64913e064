// SizeHeap: prepends a 16-byte header that records each object's usable size, so layers
// above can call getSize. The size sits in the word just before the object. Hardened
// (core/Hardening.h), the word before it holds a cookie (the secret mixed with the
// object's address: a load and an xor from the pointer free holds), and getSize, which every free above asks first, refuses a pointer whose cookie
// is wrong: one this heap did not hand out, or one inside an object.
#pragma once

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
      if (*cookieOf(object) != hardening::tagOf(object)) [[unlikely]] hardening::invalidPointer(object);
    }
    return sizeword::size(object);
  }

 private:
  static constexpr bool kHardened = hardened<Super>();
  static std::uint64_t* cookieOf(void* object) { return static_cast<std::uint64_t*>(object) - 2; }
};

}  // namespace heapkit
