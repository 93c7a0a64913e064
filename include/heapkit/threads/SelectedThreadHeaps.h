// SelectedThreadHeaps: ThreadHeapRegistry's interface (ScalableHeap's Registry policy) for
// a caller that says which thread runs, instead of the thread that calls. The simulator
// runs a trace of several threads on one thread: before each run of one trace thread's
// operations it selects that thread, and the allocator gives it that thread's heap, made
// at its first small malloc as ThreadHeapRegistry makes a thread's heap, with the same
// free tokens and the same remote frees for objects another thread's heap owns. A trace's
// threads replayed on real threads over ThreadHeapRegistry, each in its recorded turn,
// make the same calls in the same order, so both hold the same bytes
// (tests/sim/thread_fidelity_test.cpp).
//
// A trace does not record when a thread exits, so a selected thread's heap serves it until
// the end: no heap is handed on to a later thread (releaseThisThreadsHeap still does).
// A thread never selected is thread 0, as a registry with one thread.
//
// Heap: the per-thread heap, with freeToken(), the links nextFree, nextAll, and `thread`.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "heapkit/threads/ThreadHeapList.h"
#include "heapkit/threads/ThreadHeapRegistry.h"

namespace heapkit {

template <class Heap>
class SelectedThreadHeaps {
 public:
  using ThreadCache = typename ThreadHeapRegistry<Heap>::ThreadCache;
  static constexpr std::uint64_t kNoFreeToken = ThreadHeapRegistry<Heap>::kNoFreeToken;
  static constexpr std::uint64_t kNoInstance = ThreadHeapRegistry<Heap>::kNoInstance;

  // What the allocator's inline paths read: the selected thread's heap. Thread-local like
  // ThreadHeapRegistry's, so that simulations on different threads do not share it; each
  // instance sets it on every select().
  static inline constinit thread_local ThreadCache threadCache{kNoInstance, nullptr, kNoFreeToken};

  static std::uint64_t newFreeToken() { return ThreadHeapRegistry<Heap>::newFreeToken(); }

  // No thread exits here (the argument is ThreadHeapRegistry's).
  explicit SelectedThreadHeaps(void (*)(void*)) : id_(newThreadRegistryId()) {}
  SelectedThreadHeaps(const SelectedThreadHeaps&) = delete;
  SelectedThreadHeaps& operator=(const SelectedThreadHeaps&) = delete;
  ~SelectedThreadHeaps() {
    if (threadCache.instanceId == id_) threadCache = {kNoInstance, nullptr, kNoFreeToken};
  }

  std::uint64_t id() const { return id_; }

  // The calls from now on are trace thread `thread`'s.
  void select(std::uint32_t thread) {
    selected_ = thread;
    cacheFor(find(thread));
  }
  std::uint32_t selected() const { return selected_; }

  // The selected thread's heap; with `create`, a released one or createHeap()'s if it has
  // none. Null when it has none (or none could be made).
  template <class Create>
  Heap* myHeap(bool create, Create&& createHeap) {
    Heap* heap = find(selected_);
    if (heap == nullptr) {
      if (!create) return nullptr;
      heap = heaps_.acquire(createHeap);
      if (heap == nullptr) return nullptr;
      heap->thread = selected_;
      if (selected_ < kDirect) direct_[selected_] = heap;
    }
    cacheFor(heap);
    return heap;
  }

  // The selected thread no longer uses its heap (the caller then releases it).
  void forgetThisThread() {
    Heap* heap = find(selected_);
    if (heap == nullptr) return;
    if (selected_ < kDirect) direct_[selected_] = nullptr;
    heap->thread = kNoThread;
  }

  // `heap` is free for the next thread that needs one.
  void release(Heap* heap) {
    heap->thread = kNoThread;
    heaps_.release(heap);
  }
  static void uncache(Heap* heap) {
    if (threadCache.heap == heap) threadCache = {kNoInstance, nullptr, kNoFreeToken};
  }

  // Every heap ever made, for the owner's destructor.
  template <class F>
  void forEachHeap(F&& f) {
    for (Heap*& slot : direct_) slot = nullptr;
    heaps_.takeAll(f);
  }

  // One thread runs all the others: there is no lock to hold across fork.
  void prepareFork() {}
  void parentAfterFork() {}
  void childAfterFork() {}

 private:
  // Threads below kDirect find their heap in a table; the others (a trace of many
  // threads) by a walk of the heaps.
  static constexpr std::uint32_t kDirect = 256;
  static constexpr std::uint32_t kNoThread = ~std::uint32_t{0};

  Heap* find(std::uint32_t thread) const {
    if (thread < kDirect) return direct_[thread];
    for (Heap* heap = heaps_.first(); heap != nullptr; heap = heap->nextAll)
      if (heap->thread == thread) return heap;
    return nullptr;
  }

  void cacheFor(Heap* heap) {
    threadCache = heap == nullptr ? ThreadCache{kNoInstance, nullptr, kNoFreeToken} : ThreadCache{id_, heap, heap->freeToken()};
  }

  const std::uint64_t id_;
  std::uint32_t selected_ = 0;
  Heap* direct_[kDirect] = {};
  ThreadHeapList<Heap, NoLock> heaps_;
};

}  // namespace heapkit
