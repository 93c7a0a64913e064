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
//
// Limits (CacheLimits, unlimited by default) make it ScalableHeap's cache of large blocks
// as well: at most maxObjects kept (each malloc scans them), none bigger than
// maxObjectBytes, none used for a request more than fitSlack times smaller (it would pin
// pages the request does not need), and an object that no malloc reused within
// idleOperations of this layer's mallocs and frees goes back to the parent (mimalloc's
// delayed purge, counted in operations: no clock, no background thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

struct CacheLimits {
  std::size_t maxObjects = SIZE_MAX;
  std::size_t maxObjectBytes = SIZE_MAX;
  std::size_t fitSlack = SIZE_MAX;
  std::uint64_t idleOperations = UINT64_MAX;
};

template <std::size_t InitialMaxCachedBytes, SizedHeap Super>
class AdaptiveThresholdHeap : public Super {
 public:
  using Super::Super;
  AdaptiveThresholdHeap() = default;
  template <class... SuperArgs>
  explicit AdaptiveThresholdHeap(const CacheLimits& limits, SuperArgs&&... superArgs)
      : Super(static_cast<SuperArgs&&>(superArgs)...), limits_(limits) {}

  ~AdaptiveThresholdHeap() {
    while (head_ != nullptr) Super::free(removeFirst());
  }

  void* malloc(std::size_t size) {
    ++clock_;
    releaseIdle();
    void* object = removeBestFit(size);
    if (object == nullptr) return Super::malloc(size);
    cachedBytes_ -= sizeOf(object);
    --cachedObjects_;
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    ++clock_;
    std::size_t size = sizeOf(object);
    if (size > maxCachedBytes_ || size > limits_.maxObjectBytes) {
      Super::free(object);
      releaseIdle();
      return;
    }
    cachedBytes_ += size;
    ++cachedObjects_;
    auto* node = static_cast<Node*>(object);
    storeMetadata(*this, node->next, loadMetadata(*this, head_));
    storeMetadata(*this, node->freedAt, clock_);
    storeMetadata(*this, head_, node);
    while (cachedBytes_ > maxCachedBytes_ || cachedObjects_ > limits_.maxObjects) releaseOldest();
    releaseIdle();
  }

  std::size_t trimThreshold() const { return maxCachedBytes_; }
  void setTrimThreshold(std::size_t maxCachedBytes) {
    maxCachedBytes_ = maxCachedBytes;
    while (cachedBytes_ > maxCachedBytes_) releaseOldest();
  }

  std::size_t cachedBytes() const { return cachedBytes_; }
  std::size_t cachedObjects() const { return cachedObjects_; }
  const CacheLimits& limits() const { return limits_; }

 private:
  // The smallest cached object that fits (the first of equals): a big one stays for a big
  // request rather than being cut up for a small one.
  void* removeBestFit(std::size_t size) {
    Node** best = nullptr;
    std::size_t bestSize = 0;
    for (Node** link = &head_;;) {
      Node* node = loadMetadata(*this, *link);
      if (node == nullptr) break;
      countStep(*this);  // a node visited
      std::size_t candidate = sizeOf(node);
      if (candidate >= size && candidate / limits_.fitSlack <= size && (best == nullptr || candidate < bestSize)) {
        best = link;
        bestSize = candidate;
      }
      link = &node->next;
    }
    if (best == nullptr) return nullptr;
    Node* node = loadMetadata(*this, *best);
    storeMetadata(*this, *best, loadMetadata(*this, node->next));
    return node;
  }
  struct Node {
    Node* next;
    std::uint64_t freedAt;  // clock_ when it was freed
  };
  // The object's size, read from its size word as part of this layer's work.
  std::size_t sizeOf(void* object) { return sizeword::sizeFrom(*this, static_cast<const Super&>(*this), object); }

  void releaseOldest() {
    Node** link = &head_;
    Node* oldest = loadMetadata(*this, *link);
    while (Node* next = loadMetadata(*this, oldest->next)) {
      countStep(*this);  // a node passed
      link = &oldest->next;
      oldest = next;
    }
    storeMetadata(*this, *link, nullptr);
    cachedBytes_ -= sizeOf(oldest);
    --cachedObjects_;
    Super::free(oldest);
  }
  // The objects idle for longer than the limit go back (the list is newest first, so
  // they are its tail).
  void releaseIdle() {
    if (limits_.idleOperations == UINT64_MAX) return;
    Node** link = &head_;
    while (loadMetadata(*this, *link) != nullptr && clock_ - loadMetadata(*this, (*link)->freedAt) <= limits_.idleOperations) {
      countStep(*this);  // a node passed
      link = &(*link)->next;
    }
    while (loadMetadata(*this, *link) != nullptr) {
      countStep(*this);  // a node released
      Node* idle = *link;  // the word just loaded
      storeMetadata(*this, *link, loadMetadata(*this, idle->next));
      cachedBytes_ -= sizeOf(idle);
      --cachedObjects_;
      Super::free(idle);
    }
  }


  void* removeFirst() {
    Node* node = head_;
    head_ = node->next;
    return node;
  }
  Node* head_ = nullptr;
  std::size_t cachedBytes_ = 0;
  std::size_t maxCachedBytes_ = InitialMaxCachedBytes;
  std::size_t cachedObjects_ = 0;
  std::uint64_t clock_ = 0;  // mallocs and frees so far
  CacheLimits limits_{};
};

}  // namespace heapkit
