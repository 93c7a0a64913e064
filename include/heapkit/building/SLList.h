// SLList: a singly linked dictionary of free objects for AdaptHeap. Insertion is LIFO;
// removal takes the first object that fits.
#pragma once

#include <cstddef>

namespace heapkit {

class SLList {
 public:
  // Metadata words each operation reads and writes, for counting layers.
  static constexpr unsigned kInsertReads = 1, kInsertWrites = 2, kUnlinkReads = 1, kUnlinkWrites = 1;

  SLList() = default;
  SLList(const SLList&) = delete;
  SLList& operator=(const SLList&) = delete;

  bool empty() const { return head_ == nullptr; }

  void insert(void* object) {
    auto* node = static_cast<Node*>(object);
    node->next = head_;
    head_ = node;
  }

  void* removeFirst() {
    Node* node = head_;
    if (node != nullptr) head_ = node->next;
    return node;
  }

  template <class SizeOf>
  void* removeFirstFit(std::size_t size, SizeOf sizeOf) {
    for (Node** link = &head_; *link != nullptr; link = &(*link)->next) {
      Node* node = *link;
      if (sizeOf(node) >= size) {
        *link = node->next;
        return node;
      }
    }
    return nullptr;
  }

 private:
  struct Node {
    Node* next;
  };
  Node* head_ = nullptr;
};

}  // namespace heapkit
