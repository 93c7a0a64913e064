// LockedHeap: makes any heap thread-safe by taking a lock around every call. The simplest
// way to share one heap between threads (libheapkit-kingsley.so and libheapkit-lea.so
// are ANSIWrapper<LockedHeap<SpinLock, ...>>); contention makes it scale poorly.
#pragma once

#include <cstddef>
#include <type_traits>

#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/threads/Locks.h"

namespace heapkit {

template <class Lock, Heap Super>
class LockedHeap : public Super {
 public:
  using Super::Super;
  LockedHeap() = default;
  // Its free is its parent's behind the lock (core/Hardening.h).
  using FreeChecksPointers = std::conditional_t<freeChecksPointers<Super>(), LockedHeap, void>;

  void* malloc(std::size_t size) {
    LockGuard<Lock> guard(lock_);
    return Super::malloc(size);
  }

  void free(void* object) {
    if (object == nullptr) return;
    LockGuard<Lock> guard(lock_);
    Super::free(object);
  }

  // Sizes may live in shared metadata (a size word is read only, but a layer may keep
  // them elsewhere), so getSize takes the lock too.
  std::size_t getSize(void* object)
    requires SizedHeap<Super>
  {
    LockGuard<Lock> guard(lock_);
    return Super::getSize(object);
  }

  void* memalign(std::size_t alignment, std::size_t size)
    requires requires(Super& s) { s.memalign(alignment, size); }
  {
    LockGuard<Lock> guard(lock_);
    return Super::memalign(alignment, size);
  }

  std::size_t bytesHeld() const
    requires FootprintHeap<Super>
  {
    LockGuard<Lock> guard(lock_);
    return Super::bytesHeld();
  }
  std::size_t peakBytesHeld() const
    requires FootprintHeap<Super>
  {
    LockGuard<Lock> guard(lock_);
    return Super::peakBytesHeld();
  }

  void prepareFork() {
    lock_.lock();
    forkhooks::prepare(static_cast<Super&>(*this));
  }
  void parentAfterFork() {
    forkhooks::parent(static_cast<Super&>(*this));
    lock_.unlock();
  }
  void childAfterFork() {
    forkhooks::child(static_cast<Super&>(*this));
    lock_.reset();
  }

  Lock& lock() { return lock_; }

 private:
  mutable Lock lock_;  // footprint queries are const but must lock too
};

}  // namespace heapkit
