// ThreadHeapList: the heaps a thread registry has made, and those free to hand on. Both
// thread policies of ScalableHeap keep it: ThreadHeapRegistry (real threads, behind a
// SpinLock) and SelectedThreadHeaps (threads named by a trace, one caller, NoLock). They
// differ only in how a thread finds its heap; what happens to a heap once found is this.
// Heap: the per-thread heap, with the links nextFree and nextAll.
#pragma once

#include <atomic>
#include <cstdint>

#include "heapkit/threads/Locks.h"

namespace heapkit {

// A new registry's id: ids count up from 1, distinct across both policies, so that a
// thread's cache names the one instance it belongs to.
inline std::uint64_t newThreadRegistryId() {
  static constinit std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

template <class Heap, class Lock>
class ThreadHeapList {
 public:
  // A released heap, or createHeap()'s (called under the lock, which is taken before the
  // owner's other locks) when none is free. Null when none could be made.
  template <class Create>
  Heap* acquire(Create& createHeap) {
    LockGuard<Lock> guard(lock_);
    if (freeHeaps_ != nullptr) {
      Heap* heap = freeHeaps_;
      freeHeaps_ = heap->nextFree;
      return heap;
    }
    Heap* heap = createHeap();
    if (heap == nullptr) return nullptr;
    heap->nextAll = allHeaps_;
    allHeaps_ = heap;
    return heap;
  }

  // `heap` is free for the next thread that needs one.
  void release(Heap* heap) {
    LockGuard<Lock> guard(lock_);
    heap->nextFree = freeHeaps_;
    freeHeaps_ = heap;
  }

  // Every heap ever made, for the owner's destructor, which then owns them: the list is
  // left empty.
  template <class F>
  void takeAll(F&& f) {
    Heap* heap = allHeaps_;
    allHeaps_ = nullptr;
    freeHeaps_ = nullptr;
    while (heap != nullptr) {
      Heap* next = heap->nextAll;
      f(heap);
      heap = next;
    }
  }

  // Every heap ever made, in the list (for a lookup by a field of the heap).
  Heap* first() const { return allHeaps_; }

  // Fork: in the child, the heaps of threads that do not exist there are never handed on
  // (one of them may have been mid-update when fork() copied it); heaps on the free list
  // were released whole and are safe to hand on.
  void prepareFork() { lock_.lock(); }
  void parentAfterFork() { lock_.unlock(); }
  void childAfterFork() { lock_.reset(); }

 private:
  Lock lock_;
  Heap* freeHeaps_ = nullptr;
  Heap* allHeaps_ = nullptr;
};

}  // namespace heapkit
