// DLList: a circular doubly linked dictionary of free objects with a sentinel. Any object
// can unlink itself without knowing which list holds it, which is what lets CoalesceHeap
// take a free neighbour out of whatever bin it sits in.
#pragma once

#include <cstddef>

namespace heapkit {

class DLList {
 public:
  struct Node {
    Node* prev;
    Node* next;
  };

  // Metadata words each operation reads and writes, for counting layers.
  static constexpr unsigned kInsertReads = 1, kInsertWrites = 4, kUnlinkReads = 2, kUnlinkWrites = 2;

  DLList() { sentinel_.prev = sentinel_.next = &sentinel_; }
  DLList(const DLList&) = delete;
  DLList& operator=(const DLList&) = delete;

  bool empty() const { return sentinel_.next == &sentinel_; }

  void insert(void* object) {
    auto* node = static_cast<Node*>(object);
    node->prev = &sentinel_;
    node->next = sentinel_.next;
    sentinel_.next->prev = node;
    sentinel_.next = node;
  }

  static void unlink(void* object) {
    auto* node = static_cast<Node*>(object);
    node->prev->next = node->next;
    node->next->prev = node->prev;
  }

  void* removeFirst() {
    if (empty()) return nullptr;
    Node* node = sentinel_.next;
    unlink(node);
    return node;
  }

  template <class SizeOf>
  void* removeFirstFit(std::size_t size, SizeOf sizeOf) {
    for (Node* node = sentinel_.next; node != &sentinel_; node = node->next) {
      if (sizeOf(node) >= size) {
        unlink(node);
        return node;
      }
    }
    return nullptr;
  }

 private:
  Node sentinel_;
};

}  // namespace heapkit
