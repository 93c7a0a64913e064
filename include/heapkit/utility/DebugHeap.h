// DebugHeap: catches the common heap bugs where they happen instead of where they
// corrupt something later. Every object gets a guard header and a trailing canary;
// freed objects are filled with 0xDD and held in a quarantine of QuarantineSize objects,
// so a double free, a free of a pointer this heap never gave out, or a write past the
// end is reported with the address and size. The default report goes to stderr and
// aborts; tests install their own handler.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

enum class HeapError { InvalidFree, DoubleFree, Overflow };

inline const char* describe(HeapError error) {
  switch (error) {
    case HeapError::InvalidFree: return "free of a pointer this heap did not allocate (or whose header was overwritten)";
    case HeapError::DoubleFree: return "double free";
    case HeapError::Overflow: return "write past the end of the object";
  }
  return "heap error";
}

using HeapErrorHandler = void (*)(HeapError error, void* object, std::size_t size);

inline void abortOnHeapError(HeapError error, void* object, std::size_t size) {
  std::fprintf(stderr, "heapkit DebugHeap: %s: object %p (%zu bytes)\n", describe(error), object, size);
  std::abort();
}

template <std::size_t QuarantineSize, Heap Super>
class DebugHeap : public Super {
  static_assert(QuarantineSize > 0);
  struct alignas(16) Guard {
    std::uint64_t magic;
    std::size_t requested;
  };
  static constexpr std::uint64_t kLiveMagic = 0x6865'6170'6b69'744cULL;   // "heapkitL"
  static constexpr std::uint64_t kFreedMagic = 0x6865'6170'6b69'7446ULL;  // "heapkitF"
  static constexpr std::size_t kCanaryBytes = 16;
  static constexpr unsigned char kCanary = 0xCA;
  static constexpr unsigned char kFreshFill = 0xA5;
  static constexpr unsigned char kFreedFill = 0xDD;

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = false;

  using Super::Super;
  DebugHeap() = default;

  ~DebugHeap() {
    for (Guard*& guard : quarantine_) release(guard);
  }

  void setErrorHandler(HeapErrorHandler handler) { onError_ = handler; }

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, sizeof(Guard) + kCanaryBytes, kMinAlignment)) return nullptr;
    auto* guard = static_cast<Guard*>(Super::malloc(sizeof(Guard) + size + kCanaryBytes));
    if (guard == nullptr) return nullptr;
    guard->magic = kLiveMagic;
    guard->requested = size;
    auto* object = reinterpret_cast<unsigned char*>(guard + 1);
    std::memset(object, kFreshFill, size);
    std::memset(object + size, kCanary, kCanaryBytes);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    Guard* guard = static_cast<Guard*>(object) - 1;
    if (guard->magic == kFreedMagic) return onError_(HeapError::DoubleFree, object, guard->requested);
    if (guard->magic != kLiveMagic) return onError_(HeapError::InvalidFree, object, 0);
    auto* bytes = static_cast<unsigned char*>(object);
    for (std::size_t i = 0; i < kCanaryBytes; ++i) {
      if (bytes[guard->requested + i] != kCanary) return onError_(HeapError::Overflow, object, guard->requested);
    }
    guard->magic = kFreedMagic;
    std::memset(bytes, kFreedFill, guard->requested);
    // The ring's next slot holds the oldest quarantined object once the ring is full.
    release(quarantine_[next_]);
    quarantine_[next_] = guard;
    next_ = (next_ + 1) % QuarantineSize;
  }

  // Exactly what was asked for: code that relies on rounding is a bug DebugHeap shows.
  std::size_t getSize(void* object) const { return (static_cast<Guard*>(object) - 1)->requested; }

 private:
  void release(Guard*& guard) {
    if (guard == nullptr) return;
    guard->magic = 0;
    Super::free(guard);
    guard = nullptr;
  }

  HeapErrorHandler onError_ = abortOnHeapError;
  Guard* quarantine_[QuarantineSize] = {};
  std::size_t next_ = 0;
};

}  // namespace heapkit
