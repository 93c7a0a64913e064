// ThreadHeapRegistry: which heap each thread of a multi-threaded allocator uses, and the
// heaps' life cycle. The only layer of ScalableHeap with thread-locals and pthread keys.
//  - A thread's heap is cached in an initial-exec thread-local, with the id of the
//    registry (allocator instance) it belongs to and the heap's free token, so malloc's
//    and free's inline paths read it with no call. The pthread key is the fallback when a
//    thread uses several instances, and its destructor is how the registry learns that a
//    thread exited.
//  - A thread's heap is handed on to the next new thread when the thread exits, so many
//    short-lived threads reuse a few heaps.
//  - Free tokens identify a heap for free's inline path (a superblock holds its owner's
//    token: see building/Superblock.h). They are never reused: a heap's address may be,
//    once an instance is destroyed, while other threads still cache a pointer to it. And
//    they look random (an odd counter times an odd constant): free's inline path compares
//    a word of whatever memory a foreign pointer's 64 KiB block holds with one, and small
//    integers are common there.
//  - A thread without a heap of any instance caches kNoInstance, which is no instance's
//    id, and no instance's storage before construction holds it either (static storage
//    is zero): the inline paths may run before the allocator is constructed.
// Heap: the per-thread heap, with freeToken(), and the links nextFree, nextAll.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "heapkit/threads/Locks.h"
#include "heapkit/threads/ThreadHeapList.h"

namespace heapkit {

template <class Heap>
class ThreadHeapRegistry {
 public:
  struct ThreadCache {
    std::uint64_t instanceId;
    Heap* heap;
    std::uint64_t freeToken;  // heap->freeToken(), or kNoFreeToken
  };
  // A thread's token when it has no heap: no superblock holds it (tokens are odd), and it
  // is no value common in memory either (a thread without a heap compares it with a word
  // of a foreign pointer's block too; ~0 would match any -1 there).
  static constexpr std::uint64_t kNoFreeToken = 0x5D1C8A3E6B9F2470ull;
  // A thread's instance id when it caches no heap: ids count up from 1.
  static constexpr std::uint64_t kNoInstance = ~std::uint64_t{0};

  // One entry per thread: the heap of the instance it used last.
  static inline constinit thread_local ThreadCache threadCache{kNoInstance, nullptr, kNoFreeToken};

  // Odd counters times an odd constant: distinct (a bijection of the odd numbers), odd, so
  // never 0 (a closed superblock's token) nor kNoFreeToken.
  static std::uint64_t newFreeToken() {
    static constinit std::atomic<std::uint64_t> next{0};
    return (2 * next.fetch_add(1, std::memory_order_relaxed) + 1) * 0x9E3779B97F4A7C15ull;
  }

  // onThreadExit(heap) runs when a thread that has a heap exits.
  explicit ThreadHeapRegistry(void (*onThreadExit)(void*))
      : id_(newThreadRegistryId()) {
    keyOk_ = pthread_key_create(&key_, onThreadExit) == 0;
  }
  ThreadHeapRegistry(const ThreadHeapRegistry&) = delete;
  ThreadHeapRegistry& operator=(const ThreadHeapRegistry&) = delete;
  ~ThreadHeapRegistry() {
    if (keyOk_) pthread_key_delete(key_);
    if (threadCache.instanceId == id_) threadCache = {kNoInstance, nullptr, kNoFreeToken};
  }

  std::uint64_t id() const { return id_; }

  // This thread's heap; with `create`, a free one or createHeap()'s (called under the
  // registry's lock) if it has none. Null when it has none (or none could be made).
  template <class Create>
  Heap* myHeap(bool create, Create&& createHeap) {
    if (threadCache.instanceId == id_) return threadCache.heap;
    auto* heap = keyOk_ ? static_cast<Heap*>(pthread_getspecific(key_)) : nullptr;
    if (heap == nullptr) {
      if (!create) return nullptr;
      heap = heaps_.acquire(createHeap);
      if (heap == nullptr) return nullptr;
      threadCache = {id_, heap, heap->freeToken()};
      // Set after the cache: pthread_setspecific may itself call malloc (keys >= 32).
      if (keyOk_) pthread_setspecific(key_, heap);
    }
    threadCache = {id_, heap, heap->freeToken()};
    return heap;
  }

  // This thread no longer uses its heap (the caller then releases it).
  void forgetThisThread() {
    if (keyOk_) pthread_setspecific(key_, nullptr);
  }

  // `heap` is free for the next thread that needs one.
  void release(Heap* heap) { heaps_.release(heap); }
  // No thread of this instance caches `heap` any more (the caller is releasing it).
  static void uncache(Heap* heap) {
    if (threadCache.heap == heap) threadCache = {kNoInstance, nullptr, kNoFreeToken};
  }

  // Every heap ever made, for the owner's destructor.
  template <class F>
  void forEachHeap(F&& f) {
    heaps_.takeAll(f);
  }

  void prepareFork() { heaps_.prepareFork(); }
  void parentAfterFork() { heaps_.parentAfterFork(); }
  void childAfterFork() { heaps_.childAfterFork(); }

 private:
  const std::uint64_t id_;
  pthread_key_t key_{};
  bool keyOk_ = false;
  ThreadHeapList<Heap, SpinLock> heaps_;
};

}  // namespace heapkit
