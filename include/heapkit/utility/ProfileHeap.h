// ProfileHeap: measures what a heap costs its program. A 16-byte header remembers each
// request, so it can report bytes requested against bytes the heap below holds for them
// (internal fragmentation), live and peak, and operation counts.
#pragma once

#include <algorithm>
#include <cstddef>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

struct HeapProfile {
  std::size_t mallocs = 0;
  std::size_t frees = 0;
  std::size_t failedMallocs = 0;
  std::size_t liveObjects = 0;
  std::size_t liveRequestedBytes = 0;
  std::size_t liveHeldBytes = 0;  // what the heap below set aside for live objects
  std::size_t peakRequestedBytes = 0;
  std::size_t peakHeldBytes = 0;
  std::size_t totalRequestedBytes = 0;

  // Held / requested for the live objects: 1.0 means no internal fragmentation.
  double internalFragmentation() const {
    return liveRequestedBytes == 0 ? 1.0 : static_cast<double>(liveHeldBytes) / static_cast<double>(liveRequestedBytes);
  }
};

template <SizedHeap Super>
class ProfileHeap : public Super {
  struct alignas(16) Header {
    std::size_t requested;
    std::size_t unused;
  };

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = false;

  using Super::Super;
  ProfileHeap() = default;

  void* malloc(std::size_t size) {
    auto* header = size > SIZE_MAX - sizeof(Header) ? nullptr : static_cast<Header*>(Super::malloc(size + sizeof(Header)));
    if (header == nullptr) {
      ++profile_.failedMallocs;
      return nullptr;
    }
    header->requested = size;
    ++profile_.mallocs;
    ++profile_.liveObjects;
    profile_.totalRequestedBytes += size;
    profile_.liveRequestedBytes += size;
    profile_.liveHeldBytes += Super::getSize(header);
    profile_.peakRequestedBytes = std::max(profile_.peakRequestedBytes, profile_.liveRequestedBytes);
    profile_.peakHeldBytes = std::max(profile_.peakHeldBytes, profile_.liveHeldBytes);
    return header + 1;
  }

  void free(void* object) {
    if (object == nullptr) return;
    Header* header = static_cast<Header*>(object) - 1;
    ++profile_.frees;
    --profile_.liveObjects;
    profile_.liveRequestedBytes -= header->requested;
    profile_.liveHeldBytes -= Super::getSize(header);
    Super::free(header);
  }

  std::size_t getSize(void* object) const { return Super::getSize(static_cast<Header*>(object) - 1) - sizeof(Header); }

  const HeapProfile& profile() const { return profile_; }

 private:
  HeapProfile profile_;
};

}  // namespace heapkit
