// The locks the thread layers take. Neither allocates, so both are safe inside malloc,
// before main and in the child of a fork (where childAfterFork() re-creates them).
#pragma once

#include <pthread.h>
#include <sched.h>
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#endif

#include <atomic>

namespace heapkit {

// No lock, for what only one thread uses (SelectedThreadHeaps: the threads a trace names,
// replayed by one caller).
class NoLock {
 public:
  void lock() {}
  void unlock() {}
  void reset() {}
};

// A test-and-test-and-set lock that yields the CPU after a short spin: with more threads
// than cores (2 here), a pure spin would burn the holder's time slice.
class SpinLock {
 public:
  void lock() {
    for (unsigned spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) sched_yield();
        else __builtin_ia32_pause();
      }
    }
  }
  bool try_lock() { return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() { locked_.store(false, std::memory_order_release); }
  // Only the forking thread survives in the child; whoever held the lock is gone.
  void reset() { locked_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> locked_{false};
};

// A pthread mutex. The plain kind sleeps at once, better when critical sections are
// long; the adaptive kind (glibc's) spins a little first, then sleeps: ScalableHeap's pool
// lock, whose sections are a few hundred instructions but sometimes a purge's system call
// (a spin lock that yields made 14,000 sched_yield calls on two threads replacing
// 120-710 KiB blocks; a plain mutex makes two futex calls per contended section).
template <bool Adaptive>
class PthreadMutexLock {
 public:
  PthreadMutexLock() = default;
  PthreadMutexLock(const PthreadMutexLock&) = delete;
  PthreadMutexLock& operator=(const PthreadMutexLock&) = delete;
  ~PthreadMutexLock() { pthread_mutex_destroy(&mutex_); }

  void lock() { pthread_mutex_lock(&mutex_); }
  bool try_lock() { return pthread_mutex_trylock(&mutex_) == 0; }
  void unlock() { pthread_mutex_unlock(&mutex_); }
  void reset() { mutex_ = initial(); }

 private:
  static constexpr pthread_mutex_t initial() {
    if constexpr (Adaptive) return PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
    else return PTHREAD_MUTEX_INITIALIZER;
  }
  pthread_mutex_t mutex_ = initial();
};
using MutexLock = PthreadMutexLock<false>;
using AdaptiveMutexLock = PthreadMutexLock<true>;

// Whether the process has only ever had one thread: glibc's __libc_single_threaded (2.32
// and later), which the thread creating the second thread clears before that thread runs.
// Without it (another C library), false: always lock.
inline bool processIsSingleThreaded() {
#if __has_include(<sys/single_threaded.h>)
  return __libc_single_threaded != 0;
#else
  return false;
#endif
}

// Lock L, taken only once the process has more than one thread, as glibc's malloc does:
// a single-threaded program (most of them) pays no atomic exchange per malloc and free. A
// lock() skipped and its unlock() agree, because only the process's sole thread can
// change the answer (by creating a thread, or joining the last other one), and it does
// neither between the two: the sections are the allocator's own code. So `heapkit build`
// ships a design that is not thread-aware: LockedHeap<UnlessSingleThreaded<SpinLock>, ...>.
template <class L>
class UnlessSingleThreaded {
 public:
  void lock() {
    if (!processIsSingleThreaded()) lock_.lock();
  }
  bool try_lock() { return processIsSingleThreaded() || lock_.try_lock(); }
  void unlock() {
    if (!processIsSingleThreaded()) lock_.unlock();
  }
  void reset() { lock_.reset(); }
  // The lock itself, for tests.
  L& inner() { return lock_; }

 private:
  L lock_;
};

template <class L>
class LockGuard {
 public:
  explicit LockGuard(L& lock) : lock_(lock) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  L& lock_;
};

// Fork hooks: a layer that holds locks takes them all before fork() and releases (parent)
// or re-creates (child) them after, so the child never inherits a lock held by a thread
// that does not exist there. Layers forward the hooks to the heaps they contain.
namespace forkhooks {
template <class H>
void prepare(H& heap) {
  if constexpr (requires { heap.prepareFork(); }) heap.prepareFork();
}
template <class H>
void parent(H& heap) {
  if constexpr (requires { heap.parentAfterFork(); }) heap.parentAfterFork();
}
template <class H>
void child(H& heap) {
  if constexpr (requires { heap.childAfterFork(); }) heap.childAfterFork();
}
}  // namespace forkhooks

// A small dense index per thread (0, 1, 2, ... in order of first use), for layers that
// spread threads over an array of heaps. No dynamic initialisation, so no TLS wrapper.
inline std::size_t threadIndex() {
  static std::atomic<std::size_t> next{0};
  static thread_local std::size_t index = SIZE_MAX;
  if (index == SIZE_MAX) index = next.fetch_add(1, std::memory_order_relaxed);
  return index;
}

}  // namespace heapkit
