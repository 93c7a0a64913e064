// HardenedHeap: the checks on free that need no knowledge of the heap below. A pointer
// that is not 16-byte aligned was never handed out (every object is; not tested over a
// heap whose free checks every pointer itself, freeChecksPointers); a heap that can tell
// its own memory (owns(pointer): DmmHeap's arena) refuses pointers outside it. Either
// stops the program with one line naming the pointer (core/Hardening.h).
//
// The checks that need a layer's state (free-list tags, header cookies, boundary-tag bits)
// are made by those layers when the composition's top heap is Hardened<Top>. Every
// heapkit_add_allocator() library puts this layer under ANSIWrapper. Over a Secure<Top>
// it stands on CanaryHeap (utility/CanaryHeap.h): canaries around every object.
#pragma once

#include <cstdint>
#include <type_traits>

#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/utility/CanaryHeap.h"

namespace heapkit {

template <Heap Super>
class HardenedHeap : public std::conditional_t<secure<Super>(), CanaryHeap<Super>, Super> {
  using Base = std::conditional_t<secure<Super>(), CanaryHeap<Super>, Super>;

 public:
  using Base::Base;
  HardenedHeap() = default;

  void free(void* object) {
    // Unless the heap's free checks every pointer first (core/Hardening.h, freeChecksPointers).
    if constexpr (!freeChecksPointers<Super>()) {
      if (reinterpret_cast<std::uintptr_t>(object) % kMinAlignment != 0) [[unlikely]] return hardening::reportInvalidPointer(object);
    }
    if constexpr (requires(const Super& heap) { heap.owns(object); }) {
      if (object != nullptr && !Super::owns(object)) [[unlikely]] hardening::invalidPointer(object);
    }
    Base::free(object);
  }

  // The heap's inline paths (ScalableHeap's), passed up for the malloc wrapper to run
  // first, when nothing of this layer stands between: over a hardened heap (its inline
  // free checks alignment itself), not over a secure one (the canaries) nor over one
  // with owns() (checked here on every free). `otherwise` comes back here for the rest.
  template <class Otherwise>
  [[gnu::always_inline]] void* mallocInline(std::size_t size, Otherwise otherwise)
    requires(hardened<Super>() && !secure<Super>() && !requires(const Super& heap, void* object) { heap.owns(object); } &&
             requires(Super& heap) { heap.mallocInline(size, otherwise); })
  {
    return Super::mallocInline(size, otherwise);
  }
  template <class Otherwise>
  [[gnu::always_inline]] void freeInline(void* object, Otherwise otherwise)
    requires(hardened<Super>() && !secure<Super>() && !requires(const Super& heap, void* object) { heap.owns(object); } &&
             requires(Super& heap) { heap.freeInline(object, otherwise); })
  {
    Super::freeInline(object, otherwise);
  }
  // What freeInline passed on (not null), to the heap's slow path, under the same
  // conditions: that path checks alignment itself (ScalableHeap::freeAfterInline).
  void freeAfterInline(void* object)
    requires(hardened<Super>() && !secure<Super>() && !requires(const Super& heap) { heap.owns(object); } &&
             requires(Super& heap) { heap.freeAfterInline(object); })
  {
    Super::freeAfterInline(object);
  }
};

}  // namespace heapkit
