// UnlessSingleThreaded: no lock taken while the process has one thread (glibc's
// __libc_single_threaded), the lock taken once a second thread was started, and a
// LockedHeap over it still serves threads correctly. Its own test binary, so that the
// process starts with one thread.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "heapkit/threads/LockedHeap.h"
#include "heapkit/threads/Locks.h"
#include "heapkit/top/MallocHeap.h"

namespace heapkit {
namespace {

TEST(UnlessSingleThreaded, LocksOnlyOnceTheProcessHasASecondThread) {
#if __has_include(<sys/single_threaded.h>)
  UnlessSingleThreaded<SpinLock> lock;
  ASSERT_TRUE(processIsSingleThreaded()) << "the test starts with one thread";
  lock.lock();
  EXPECT_TRUE(lock.inner().try_lock()) << "no lock taken with one thread";
  lock.inner().unlock();
  lock.unlock();
  std::thread([] {}).join();
  ASSERT_FALSE(processIsSingleThreaded());
  lock.lock();
  EXPECT_FALSE(lock.inner().try_lock()) << "the lock is taken once a thread was started";
  lock.unlock();
  EXPECT_TRUE(lock.inner().try_lock());
  lock.inner().unlock();
#else
  GTEST_SKIP() << "no __libc_single_threaded: the lock is always taken";
#endif
}

TEST(UnlessSingleThreaded, ALockedHeapOverItServesThreads) {
  static LockedHeap<UnlessSingleThreaded<SpinLock>, MallocHeap> heap;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<void*> objects;
      for (int i = 0; i < 20000; ++i) {
        objects.push_back(heap.malloc(16 + (i + t) % 200));
        if (objects.size() > 64) {
          heap.free(objects.front());
          objects.erase(objects.begin());
        }
      }
      for (void* p : objects) heap.free(p);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(processIsSingleThreaded());
}

}  // namespace
}  // namespace heapkit
