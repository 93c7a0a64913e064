// BoundedFreelistHeap: keeps at most Bound freed objects on a LIFO list and returns the
// rest to its parent, so a cache cannot grow without limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

inline constexpr std::size_t kUnbounded = SIZE_MAX;

template <std::size_t Bound, Heap Super>
class BoundedFreelistHeap : public Super {
 public:
  using Super::Super;
  BoundedFreelistHeap() = default;

  ~BoundedFreelistHeap() {
    while (head_ != nullptr) {
      Node* node = head_;
      head_ = node->next;
      if constexpr (kParentMarks) Super::markAllocated(node);  // the parent's free checks it
      Super::free(node);
    }
  }

  void* malloc(std::size_t size) {
    // When the parent knows sizes, a cached object too small for this request is left
    // alone, so the list is safe even when requests differ in size.
    if (loadMetadata(*this, head_) != nullptr && fits(head_, size)) {
      Node* node = head_;  // the word just loaded
      storeMetadata(*this, head_, loadMetadata(*this, node->next));
      if constexpr (kParentMarks) Super::markAllocated(node);
      else if constexpr (kHardened) hardening::untagAllocated(node);
      if constexpr (Bound != kUnbounded) --length_;
      return node;
    }
    return Super::malloc(size);
  }

  void free(void* object) {
    if (object == nullptr) return;
    // Checked before the bound (a second free of a listed object must not reach the
    // parent either), tagged only once listed (the parent may hand the object out again).
    // A parent that keeps the mark has checked it already (StrictSegHeap's bins).
    if constexpr (kHardened && !kParentMarks) hardening::checkNotFreed(object);
    if constexpr (Bound != kUnbounded) {
      if (length_ == Bound) {
        Super::free(object);
        return;
      }
      ++length_;
    }
    auto* node = static_cast<Node*>(object);
    storeMetadata(*this, node->next, loadMetadata(*this, head_));
    storeMetadata(*this, head_, node);
    if constexpr (kParentMarks) Super::markFreed(object);
    else if constexpr (kHardened) hardening::tagFreed(object);
  }

  bool empty() const { return head_ == nullptr; }
  std::size_t cachedObjects() const requires(Bound != kUnbounded) { return length_; }

 private:
  static constexpr bool kHardened = hardened<Super>();
  // Hardened, the parent may keep the freed mark in its own header and check it before
  // this list's free (StrictSegHeap's bins over SizeHeap: its cookie, which free checks
  // anyway, so a double free costs no tag's compare and store here).
  static constexpr bool kParentMarks = kHardened && requires(void* object) {
    Super::markFreed(object);
    Super::markAllocated(object);
  };

  struct Node {
    Node* next;
  };

  bool fits(Node* node, std::size_t size) {
    if constexpr (requires { Super::ListedObjectsFit; }) return true;  // the parent vouches (StrictSegHeap)
    else if constexpr (SizedHeap<Super>) return sizeword::sizeFrom(*this, static_cast<const Super&>(*this), node) >= size;
    else return true;
  }

  // An unbounded list keeps no count: an empty member takes no room (a nullptr_t would
  // take a word, which makes every bin of a segregated heap a word bigger).
  struct NoCount {};
  Node* head_ = nullptr;
  [[no_unique_address]] std::conditional_t<Bound != kUnbounded, std::size_t, NoCount> length_{};
};

}  // namespace heapkit
