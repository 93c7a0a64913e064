// The benchmark workloads must compute the same checksum on every correct heap, and must
// notice when a heap hands out memory that is still in use.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "heapkit/general/CoalescingKingsleyHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "workloads/Workloads.h"

namespace {

using namespace heapkit;
using namespace heapkit::workloads;

// Small scales: a few hundred thousand allocations each, fast even under ASan.
struct TestScale {
  std::string_view workload;
  unsigned scale;
};
constexpr TestScale kTestScales[] = {{"cfrac", 8}, {"espresso", 4}, {"gcbench", 1}, {"lindsay", 20}, {"boxedsim", 3},
                                 {"alloctest", 2}};

std::uint64_t checksumOnMalloc(std::string_view workload, unsigned scale) {
  MallocPolicy malloc;
  return runWorkload(workload, malloc, scale);
}

template <class H>
class WorkloadsOnHeap : public ::testing::Test {};
using Heaps = ::testing::Types<KingsleyHeap<MmapHeap>, CoalescingKingsleyHeap<MmapHeap>, LeaHeap<MmapHeap>>;
TYPED_TEST_SUITE(WorkloadsOnHeap, Heaps);

TYPED_TEST(WorkloadsOnHeap, SameChecksumAsMallocAndEveryObjectFreed) {
  for (const TestScale& test : kTestScales) {
    SCOPED_TRACE(std::string(test.workload));
    TypeParam heap;
    HeapPolicy<TypeParam> policy{&heap};
    EXPECT_EQ(runWorkload(test.workload, policy, test.scale), checksumOnMalloc(test.workload, test.scale));
    EXPECT_GT(heap.peakBytesHeld(), 0u);
  }
}

// Counts live objects, so a workload that leaks (or frees twice) is noticed.
struct CountingPolicy {
  long live = 0;
  void* allocate(std::size_t size) {
    ++live;
    return std::malloc(size);
  }
  void deallocate(void* object) {
    if (object != nullptr) --live;
    std::free(object);
  }
};

TEST(Workloads, FreeEverythingTheyAllocate) {
  for (const TestScale& test : kTestScales) {
    CountingPolicy counting;
    runWorkload(test.workload, counting, test.scale);
    EXPECT_EQ(counting.live, 0) << test.workload;
  }
}

TEST(Workloads, ChecksumDependsOnScale) {
  for (const TestScale& test : kTestScales)
    EXPECT_NE(checksumOnMalloc(test.workload, test.scale), checksumOnMalloc(test.workload, test.scale + 1)) << test.workload;
}

// A broken heap: every `aliasEvery` allocations, it answers a request with the most
// recent live object of the same requested size, so two live objects share memory.
// (Frees are counted per address, so the memory itself is released exactly once.)
// One aliasing may by chance hit an object about to die or holding the same value;
// repeated ones must not go unnoticed.
class AliasingPolicy {
 public:
  explicit AliasingPolicy(long aliasEvery) : aliasEvery_(aliasEvery) {}
  ~AliasingPolicy() {
    for (auto& [object, entry] : live_) std::free(object);
  }
  void* allocate(std::size_t size) {
    if (++allocations_ % aliasEvery_ == 0) {
      auto last = lastBySize_.find(size);
      if (last != lastBySize_.end() && live_.count(last->second) != 0) {
        ++live_[last->second].references;
        aliased_ = true;
        return last->second;
      }
    }
    void* object = std::malloc(size);
    live_[object] = Entry{size, 1};
    lastBySize_[size] = object;
    return object;
  }
  void deallocate(void* object) {
    if (object == nullptr) return;
    auto found = live_.find(object);
    if (found == live_.end() || --found->second.references > 0) return;
    live_.erase(found);
    std::free(object);
  }
  bool aliased() const { return aliased_; }

 private:
  struct Entry {
    std::size_t size;
    int references;
  };
  long aliasEvery_;
  long allocations_ = 0;
  bool aliased_ = false;
  std::unordered_map<void*, Entry> live_;
  std::unordered_map<std::size_t, void*> lastBySize_;
};

// Run in a child process: a corrupted pointer may crash the workload rather than fail
// its check, and that is a catch too. What must never happen is a clean finish.
TEST(Workloads, CatchAHeapThatHandsOutLiveMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto notACleanFinish = [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); };
  for (const TestScale& test : kTestScales) {
    for (long aliasEvery : {997L, 20011L}) {
      EXPECT_EXIT(
          {
            alarm(10);  // a corrupted workload that loops (a cycle in a list) is caught as well
            AliasingPolicy broken(aliasEvery);
            try {
              runWorkload(test.workload, broken, test.scale);
            } catch (const WorkloadFailure& failure) {
              std::fprintf(stderr, "caught: %s\n", failure.what());
              std::_Exit(3);
            }
            std::_Exit(broken.aliased() ? 0 : 4);
          },
          notACleanFinish, "")
          << test.workload << " finished cleanly with aliasing every " << aliasEvery << " allocations";
    }
  }
}

// The check, not luck, catches it: where the workload does not crash, it names the fault.
TEST(Workloads, ReportTheFaultTheyFind) {
  AliasingPolicy broken(997);
  EXPECT_THROW(runWorkload("cfrac", broken, 8), WorkloadFailure);
  AliasingPolicy brokenTrees(997);
  EXPECT_THROW(runWorkload("gcbench", brokenTrees, 1), WorkloadFailure);
}

}  // namespace
