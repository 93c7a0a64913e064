// QuickListHeap: exact-size LIFO lists for small objects (one list per 16 bytes of usable
// size, up to MaxQuickBytes) in front of a coalescing heap, as in Lea's allocator. Small frees skip
// coalescing entirely. The lists are consolidated (given back to the heap below, which
// merges them) when a request cannot otherwise be met without growing the heap.
#pragma once

#include <array>
#include <cstddef>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <std::size_t MaxQuickBytes, SizedHeap Super>
class QuickListHeap : public Super {
  static_assert(MaxQuickBytes % 16 == 0 && MaxQuickBytes >= 16);
  static constexpr std::size_t kLists = MaxQuickBytes / 16 + 1;

 public:
  using Super::Super;
  QuickListHeap() = default;

  ~QuickListHeap() { consolidate(); }

  void* malloc(std::size_t size) {
    if (size <= MaxQuickBytes) {
      // The list of exactly the usable size the heap below would give this request.
      std::size_t list = usableSizeFor(size) / 16;
      if (Node* node = heads_[list]) {
        heads_[list] = node->next;
        return node;
      }
    }
    // Before the heap below grows, give it the quick-listed objects to merge, as
    // dlmalloc consolidates its fast bins before extending the heap: otherwise objects
    // freed at one size could never serve another, and the heap grows while they idle.
    if constexpr (requires(Super& s) { s.mallocCached(size); }) {
      if (quickObjects_ != 0) {
        if (void* object = Super::mallocCached(size)) return object;
        consolidate();
      }
    }
    return Super::malloc(size);
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t list = Super::getSize(object) / 16;
    if (list < kLists) {
      auto* node = static_cast<Node*>(object);
      node->next = heads_[list];
      heads_[list] = node;
      ++quickObjects_;
      return;
    }
    Super::free(object);
  }

  // Give every quick-listed object back to the heap below.
  void consolidate() {
    for (Node*& head : heads_) {
      while (head != nullptr) {
        Node* node = head;
        head = node->next;
        Super::free(node);
      }
    }
    quickObjects_ = 0;
  }

 private:
  struct Node {
    Node* next;
  };

  // Usable sizes are multiples of 16 (SizeHeap) or 16k + 8 (overlapped boundary tags):
  // either way, one usable size per list.
  static constexpr std::size_t usableSizeFor(std::size_t size) {
    if constexpr (requires { Super::usableSizeFor(size); }) return Super::usableSizeFor(size);
    else return usableBytesFor(size);
  }
  static_assert(usableSizeFor(MaxQuickBytes) / 16 < kLists);

  std::array<Node*, kLists> heads_{};
  // Counts frees since the last consolidation: an upper bound, enough to skip work.
  std::size_t quickObjects_ = 0;
};

}  // namespace heapkit
