// DLList: a circular doubly linked dictionary of free objects with a sentinel. Any object
// can unlink itself without knowing which list holds it, which is what lets CoalesceHeap
// take a free neighbour out of whatever bin it sits in. It is also the library's one list
// of whole chunks (SegregatedFitHeap's chunks, BuddyHeap's areas): the record at the
// start of each begins with a Node, so a chunk leaves the list in O(1) when it is freed.
//
// Every operation takes the heap that owns the list: the sentinel and the links are its
// metadata, loaded and stored through it (core/Counting.h), so a counting heap counts
// each access where it happens, and one step per node visited by a search.
#pragma once

#include <cstddef>

#include "heapkit/core/Counting.h"

namespace heapkit {

class DLList {
 public:
  struct Node {
    Node* prev;
    Node* next;
  };

  DLList() { sentinel_.prev = sentinel_.next = &sentinel_; }
  DLList(const DLList&) = delete;
  DLList& operator=(const DLList&) = delete;

  template <class H>
  bool empty(H& heap) const {
    return loadMetadata(heap, sentinel_.next) == &sentinel_;
  }

  template <class H>
  void insert(H& heap, void* object) {
    auto* node = static_cast<Node*>(object);
    storeMetadata(heap, node->prev, &sentinel_);
    storeMetadata(heap, node->next, loadMetadata(heap, sentinel_.next));
    storeMetadata(heap, loadMetadata(heap, sentinel_.next)->prev, node);
    storeMetadata(heap, sentinel_.next, node);
  }

  template <class H>
  static void unlink(H& heap, void* object) {
    auto* node = static_cast<Node*>(object);
    storeMetadata(heap, loadMetadata(heap, node->prev)->next, loadMetadata(heap, node->next));
    storeMetadata(heap, loadMetadata(heap, node->next)->prev, loadMetadata(heap, node->prev));
  }

  template <class H>
  void* removeFirst(H& heap) {
    Node* node = loadMetadata(heap, sentinel_.next);
    if (node == &sentinel_) return nullptr;
    unlink(heap, node);
    return node;
  }

  // A walk from the first object to the last: first is nullptr when the list is empty,
  // next nullptr after the last. Each reads one link through the heap (pass an
  // Uncounted for a walk that is no heap's work).
  template <class H>
  void* first(H& heap) const {
    Node* node = loadMetadata(heap, sentinel_.next);
    return node == &sentinel_ ? nullptr : node;
  }
  template <class H>
  void* next(H& heap, const void* object) const {
    Node* node = loadMetadata(heap, static_cast<const Node*>(object)->next);
    return node == &sentinel_ ? nullptr : node;
  }

  // How many objects the list holds: a walk, for tests (not counted).
  std::size_t size() const {
    std::size_t count = 0;
    for (const Node* node = sentinel_.next; node != &sentinel_; node = node->next) ++count;
    return count;
  }

  // The first object whose size (sizeOf, which counts its own read) is at least `size`.
  template <class H, class SizeOf>
  void* removeFirstFit(H& heap, std::size_t size, SizeOf sizeOf) {
    for (Node* node = loadMetadata(heap, sentinel_.next); node != &sentinel_; node = loadMetadata(heap, node->next)) {
      countStep(heap);  // a node visited
      if (sizeOf(node) >= size) {
        unlink(heap, node);
        return node;
      }
    }
    return nullptr;
  }

 private:
  Node sentinel_;
};

}  // namespace heapkit
