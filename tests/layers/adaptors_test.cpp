// Standard containers on heapkit compositions: the STL allocator adaptor, the pmr
// memory resource, and per-class operator new.
#include <gtest/gtest.h>

#include <map>
#include <memory_resource>
#include <string>
#include <vector>

#include "heapkit/heapkit.h"

namespace heapkit::testing {
namespace {

TEST(StlAllocator, BacksVectorAndMapAndCountsInTheHeap) {
  ProfileHeap<LeaHeap<MallocHeap>> heap;
  {
    using Alloc = StlAllocator<int, decltype(heap)>;
    std::vector<int, Alloc> numbers{Alloc(heap)};
    for (int i = 0; i < 10000; ++i) numbers.push_back(i);
    std::map<int, std::string, std::less<>, StlAllocator<std::pair<const int, std::string>, decltype(heap)>> names{
        StlAllocator<std::pair<const int, std::string>, decltype(heap)>(heap)};
    for (int i = 0; i < 1000; ++i) names[i] = std::to_string(i);
    EXPECT_EQ(numbers[9999], 9999);
    EXPECT_EQ(names[500], "500");
    EXPECT_GT(heap.profile().liveObjects, 1000u);
    EXPECT_EQ(Alloc(heap), Alloc(heap));
  }
  EXPECT_EQ(heap.profile().liveObjects, 0u);
}

TEST(StlAllocator, ImpossibleCountsThrow) {
  KingsleyHeap<MallocHeap> heap;
  StlAllocator<double, decltype(heap)> allocator(heap);
  EXPECT_THROW((void)allocator.allocate(SIZE_MAX / 4), std::bad_array_new_length);
}

TEST(HeapMemoryResource, BacksPmrContainersAndOverAlignedRequests) {
  HeapMemoryResource<ProfileHeap<KingsleyHeap<MallocHeap>>> resource;
  {
    std::pmr::vector<std::pmr::string> words(&resource);
    for (int i = 0; i < 1000; ++i) words.emplace_back("a string long enough to need the heap " + std::to_string(i));
    EXPECT_EQ(words[999].substr(0, 8), "a string");
    EXPECT_GT(resource.heap().profile().liveObjects, 900u);

    void* aligned = resource.allocate(100, 256);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned) % 256, 0u);
    resource.deallocate(aligned, 100, 256);
  }
  EXPECT_EQ(resource.heap().profile().liveObjects, 0u);
  EXPECT_TRUE(resource.is_equal(resource));
  HeapMemoryResource<KingsleyHeap<MallocHeap>> other;
  EXPECT_FALSE(resource.is_equal(other));
}

TEST(HeapMemoryResource, FailureThrowsBadAlloc) {
  HeapMemoryResource<KingsleyHeap<MallocHeap>> resource;
  // Opaque to the compiler, which would otherwise reject the size at compile time.
  volatile std::size_t impossible = SIZE_MAX - 64;
  EXPECT_THROW((void)resource.allocate(impossible, 16), std::bad_alloc);
  EXPECT_THROW((void)resource.allocate(impossible, 4096), std::bad_alloc);
}

using NodeHeap = ProfileHeap<FreelistHeap<SizeHeap<MallocHeap>>>;
struct Node : PerClassHeap<NodeHeap> {
  int value = 0;
  Node* next = nullptr;
};

TEST(PerClassHeap, NewAndDeleteUseTheClassHeap) {
  const HeapProfile& profile = UniqueHeap<NodeHeap>::instance().profile();
  std::size_t before = profile.mallocs;
  Node* head = nullptr;
  for (int i = 0; i < 100; ++i) head = new Node{{}, i, head};
  EXPECT_EQ(profile.mallocs - before, 100u);
  EXPECT_EQ(head->value, 99);
  while (head != nullptr) {
    Node* next = head->next;
    delete head;
    head = next;
  }
  EXPECT_EQ(profile.liveObjects, 0u);
  Node* reused = new (std::nothrow) Node;
  ASSERT_NE(reused, nullptr);
  delete reused;
}

}  // namespace
}  // namespace heapkit::testing
