// AdaptiveThresholdHeap: keeps freed objects for reuse up to a limit that changes at run
// time, and gives the rest to its parent. Between a heap and the OS it is glibc's dynamic
// trim threshold: it starts at InitialMaxCachedBytes and a router above
// (AdaptiveSelectMmapHeap) raises it when the program shows it uses bigger blocks, so
// that wholly free regions of that size stay for reuse instead of being unmapped and
// faulted in anew. Unlike ThresholdHeap it keeps the objects freed last (the oldest go
// when a new one does not fit) and reuses the smallest that fits: with a working set of
// big blocks replaced in a loop, either of ThresholdHeap's choices left requests with no
// kept region big enough, and twice glibc's page faults. Lowering the limit gives back
// what is kept beyond it at once.
#pragma once

#include <cstddef>
#include <new>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <std::size_t InitialMaxCachedBytes, SizedHeap Super>
class AdaptiveThresholdHeap : public Super {
 public:
  using Super::Super;
  AdaptiveThresholdHeap() = default;

  ~AdaptiveThresholdHeap() {
    while (head_ != nullptr) Super::free(removeFirst());
  }

  void* malloc(std::size_t size) {
    void* object = removeBestFit(size);
    if (object == nullptr) return Super::malloc(size);
    countWork(*this, 0, 1, 1);
    cachedBytes_ -= Super::getSize(object);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t size = Super::getSize(object);
    if (size > maxCachedBytes_) {
      Super::free(object);
      return;
    }
    cachedBytes_ += size;
    head_ = new (object) Node{head_};
    countWork(*this, 1, 2, 3);
    while (cachedBytes_ > maxCachedBytes_) releaseOldest();
  }

  std::size_t trimThreshold() const { return maxCachedBytes_; }
  void setTrimThreshold(std::size_t maxCachedBytes) {
    maxCachedBytes_ = maxCachedBytes;
    while (cachedBytes_ > maxCachedBytes_) releaseOldest();
  }

  std::size_t cachedBytes() const { return cachedBytes_; }

 private:
  // The smallest cached object that fits (the first of equals): a big one stays for a big
  // request rather than being cut up for a small one.
  void* removeBestFit(std::size_t size) {
    Node** best = nullptr;
    std::size_t bestSize = 0;
    for (Node** link = &head_; *link != nullptr; link = &(*link)->next) {
      countWork(*this, 1, 2, 0);
      std::size_t candidate = Super::getSize(*link);
      if (candidate >= size && (best == nullptr || candidate < bestSize)) {
        best = link;
        bestSize = candidate;
      }
    }
    if (best == nullptr) return nullptr;
    Node* node = *best;
    *best = node->next;
    return node;
  }
  struct Node {
    Node* next;
  };
  void releaseOldest() {
    Node** link = &head_;
    while ((*link)->next != nullptr) link = &(*link)->next;
    Node* oldest = *link;
    *link = nullptr;
    cachedBytes_ -= Super::getSize(oldest);
    Super::free(oldest);
  }
  void* removeFirst() {
    Node* node = head_;
    head_ = node->next;
    return node;
  }
  Node* head_ = nullptr;
  std::size_t cachedBytes_ = 0;
  std::size_t maxCachedBytes_ = InitialMaxCachedBytes;
};

}  // namespace heapkit
