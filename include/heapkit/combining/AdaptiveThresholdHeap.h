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
//
// With PeakWindowOperations > 0 it trims with hysteresis (AdaptiveLeaHeap's regions): it
// also keeps what the program used at its recent peak and no longer uses, the most bytes
// out (handed to the program and not freed) over the last one or two windows of that many
// of this layer's operations, less the bytes out now, up to PeakKeepFactor times the
// limit. A working set that swings by a few regions (records of 32 KiB and their objects
// filled, queued and freed) then keeps the regions of the swing instead of unmapping and
// faulting them in again at each swing; what was kept beyond the limit goes back two
// windows after the peak, and the process never holds more than it held at that peak.
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

template <std::size_t InitialMaxCachedBytes, SizedHeap Super, std::uint64_t PeakWindowOperations = 0,
          std::size_t PeakKeepFactor = 0>
class AdaptiveThresholdHeap : public Super {
  static constexpr bool kFollowsPeak = PeakWindowOperations > 0;

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
    bool fromParent;
    return malloc(size, fromParent);
  }

  // The same, saying whether the object is the parent's just now (not one kept here,
  // which may hold old data): over a top heap whose fresh pages read as zero, its pages
  // do (LargeObjectHeap's blocks, for calloc and realloc).
  void* malloc(std::size_t size, bool& fromParent) {
    ++clock_;
    releaseIdle();
    void* object = removeBestFit(size);
    fromParent = object == nullptr;
    if (object == nullptr) {
      object = Super::malloc(size);
      if constexpr (kFollowsPeak) {
        if (object != nullptr) handedOut(sizeOf(object));
      }
      return object;
    }
    std::size_t bytes = sizeOf(object);
    cachedBytes_ -= bytes;
    --cachedObjects_;
    if constexpr (kFollowsPeak) handedOut(bytes);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    ++clock_;
    std::size_t size = sizeOf(object);
    if constexpr (kFollowsPeak) {
      bytesOut_ = size < bytesOut_ ? bytesOut_ - size : 0;
      nextWindowIfDue();
    }
    if (size > keptBytesLimit() || size > limits_.maxObjectBytes) {
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
    while (cachedBytes_ > keptBytesLimit() || cachedObjects_ > limits_.maxObjects) releaseOldest();
    releaseIdle();
  }

  std::size_t trimThreshold() const { return maxCachedBytes_; }
  void setTrimThreshold(std::size_t maxCachedBytes) {
    maxCachedBytes_ = maxCachedBytes;
    while (cachedBytes_ > keptBytesLimit()) releaseOldest();
  }

  std::size_t cachedBytes() const { return cachedBytes_; }
  std::size_t cachedObjects() const { return cachedObjects_; }
  // The most bytes kept now: the limit, and with PeakWindowOperations, the bytes the
  // program used at its recent peak and no longer uses (at most PeakKeepFactor limits).
  std::size_t keptBytesLimit() const {
    if constexpr (kFollowsPeak) {
      std::size_t peak = recentPeakBytes_ > windowPeakBytes_ ? recentPeakBytes_ : windowPeakBytes_;
      std::size_t unused = peak > bytesOut_ ? peak - bytesOut_ : 0;
      std::size_t cap = PeakKeepFactor * maxCachedBytes_;
      if (unused > cap) unused = cap;
      return unused > maxCachedBytes_ ? unused : maxCachedBytes_;
    } else {
      return maxCachedBytes_;
    }
  }
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


  void handedOut(std::size_t bytes) {
    bytesOut_ += bytes;
    if (bytesOut_ > windowPeakBytes_) windowPeakBytes_ = bytesOut_;
    nextWindowIfDue();
  }
  // The peak of the window just ended stays the recent peak for one more window, so a
  // swing that straddles the boundary is still remembered; then what it kept goes back.
  void nextWindowIfDue() {
    if (clock_ - windowStart_ < PeakWindowOperations) return;
    recentPeakBytes_ = windowPeakBytes_;
    windowPeakBytes_ = bytesOut_;
    windowStart_ = clock_;
    while (cachedBytes_ > keptBytesLimit()) releaseOldest();
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
  // With PeakWindowOperations only: bytes handed out and not freed, their most in this
  // window and in the one before, and when this window began (clock_).
  std::size_t bytesOut_ = 0;
  std::size_t windowPeakBytes_ = 0;
  std::size_t recentPeakBytes_ = 0;
  std::uint64_t windowStart_ = 0;
};

}  // namespace heapkit
