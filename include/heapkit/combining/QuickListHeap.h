// QuickListHeap: exact-size LIFO lists for small objects (usable sizes 16, 32, ...,
// MaxQuickBytes) in front of a coalescing heap, as in Lea's allocator. Small frees skip
// coalescing entirely. The lists are consolidated (given back to the heap below, which
// merges them) when a larger request cannot otherwise be met without growing the heap.
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
      std::size_t list = size <= 16 ? 1 : (size + 15) / 16;
      if (Node* node = heads_[list]) {
        heads_[list] = node->next;
        return node;
      }
      return Super::malloc(size);
    }
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
    std::size_t size = Super::getSize(object);
    if (size <= MaxQuickBytes) {
      auto* node = static_cast<Node*>(object);
      node->next = heads_[size / 16];
      heads_[size / 16] = node;
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
  std::array<Node*, kLists> heads_{};
  // Counts frees since the last consolidation: an upper bound, enough to skip work.
  std::size_t quickObjects_ = 0;
};

}  // namespace heapkit
