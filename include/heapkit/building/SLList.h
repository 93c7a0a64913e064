// SLList: a singly linked dictionary of free objects for AdaptHeap. Insertion is LIFO;
// removal takes the first object that fits.
//
// Every operation takes the heap that owns the list: the head and the links are its
// metadata, loaded and stored through it (core/Counting.h), so a counting heap counts
// each access where it happens, and one step per node visited by a search.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"

namespace heapkit {

class SLList {
 public:
  SLList() = default;
  SLList(const SLList&) = delete;
  SLList& operator=(const SLList&) = delete;

  template <class H>
  bool empty(H& heap) const {
    return loadMetadata(heap, head_) == nullptr;
  }

  template <class H>
  void insert(H& heap, void* object) {
    auto* node = static_cast<Node*>(object);
    storeMetadata(heap, node->next, loadMetadata(heap, head_));
    storeMetadata(heap, head_, node);
  }

  template <class H>
  void* removeFirst(H& heap) {
    Node* node = loadMetadata(heap, head_);
    if (node != nullptr) storeMetadata(heap, head_, loadMetadata(heap, node->next));
    return node;
  }

  // The first object whose size (sizeOf, which counts its own read) is at least `size`.
  template <class H, class SizeOf>
  void* removeFirstFit(H& heap, std::size_t size, SizeOf sizeOf) {
    for (Node** link = &head_;;) {
      Node* node = loadMetadata(heap, *link);
      if (node == nullptr) return nullptr;
      countStep(heap);  // a node visited
      if (sizeOf(node) >= size) {
        storeMetadata(heap, *link, loadMetadata(heap, node->next));
        return node;
      }
      link = &node->next;
    }
  }

 private:
  struct Node {
    Node* next;
  };
  Node* head_ = nullptr;
};

}  // namespace heapkit
