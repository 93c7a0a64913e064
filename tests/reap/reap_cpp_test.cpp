// heapkit::Reap, the C++ face of reaps: a std::pmr::memory_resource with RAII ownership
// and nesting. Model checks run on nested reaps too.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory_resource>
#include <string>
#include <vector>

#include "heapkit/special/Reap.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

TEST(Reap, StandardContainersLiveOnAReap) {
  Reap reap;
  {
    std::pmr::vector<std::pmr::string> words(&reap);
    std::pmr::map<int, std::pmr::string> table(&reap);
    for (int i = 0; i < 2000; ++i) {
      words.emplace_back("a string long enough to need its own allocation #" + std::to_string(i));
      table.emplace(i, words.back());
    }
    EXPECT_EQ(table.at(1234), words[1234]);
    EXPECT_GT(reap.bytesInUse(), 2000u * 50);
  }
  EXPECT_EQ(reap.bytesInUse(), 0u) << "every object was deallocated one by one";
  EXPECT_TRUE(reap.heap().inHeapMode());
}

TEST(Reap, OverAlignedRequestsThroughTheMemoryResource) {
  Reap reap;
  std::pmr::memory_resource* resource = &reap;
  void* object = resource->allocate(100, 256);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(object) % 256, 0u);
  resource->deallocate(object, 100, 256);
  volatile std::size_t impossible = SIZE_MAX;  // volatile: GCC rejects a literal this size
  EXPECT_THROW((void)resource->allocate(impossible, 8), std::bad_alloc);
  EXPECT_TRUE(resource->is_equal(reap));
  Reap other;
  EXPECT_FALSE(resource->is_equal(other));
}

TEST(Reap, ChildrenShareTheRootsTopHeap) {
  Reap parent;
  Reap child(parent);
  EXPECT_EQ(child.parentReap(), &parent);
  EXPECT_EQ(parent.firstChild(), &child);
  child.malloc(100);
  EXPECT_GT(child.footprint(), 0u);
  EXPECT_GE(parent.footprint(), child.footprint()) << "a root's footprint covers its tree";
  EXPECT_EQ(parent.bytesInUse(), 0u);
  EXPECT_FALSE(parent.heap().inHeapMode()) << "the child's chunks never pass through the parent";
  std::size_t treeFootprint = parent.footprint();
  child.clear();
  EXPECT_EQ(child.footprint(), 0u);
  EXPECT_EQ(parent.footprint(), treeFootprint) << "the root's top heap caches the chunk";
  Reap second(parent);
  second.malloc(100);
  EXPECT_EQ(parent.footprint(), treeFootprint);
  EXPECT_EQ(parent.peakFootprint(), treeFootprint);
  child.malloc(100);
  EXPECT_EQ(parent.peakFootprint(), 2 * treeFootprint) << "both children hold a chunk now";
}

TEST(Reap, NestedLifetimes) {
  Reap root;
  char* rootObject = static_cast<char*>(root.malloc(64));
  std::strcpy(rootObject, "root");
  {
    Reap level1(root);
    char* object1 = static_cast<char*>(level1.malloc(64));
    std::strcpy(object1, "level1");
    {
      Reap level2(level1);
      for (int i = 0; i < 10000; ++i) std::memset(level2.malloc(100), 2, 100);
      EXPECT_GT(root.footprint(), 1000000u);
    }  // level2's chunks go back into level1
    EXPECT_EQ(level1.firstChild(), nullptr);
    EXPECT_STREQ(object1, "level1");
    for (int i = 0; i < 5000; ++i) std::memset(level1.malloc(100), 1, 100);
  }
  EXPECT_STREQ(rootObject, "root");
  EXPECT_EQ(root.bytesInUse(), root.getSize(rootObject) + ReapHeap<ReapChunkSource>::kHeaderBytes)
      << "the children's objects are not the root's";
}

TEST(Reap, ClearingAParentClearsItsChildrenWhichStayUsable) {
  Reap parent;
  Reap child(parent);
  Reap grandchild(child);
  for (int i = 0; i < 1000; ++i) {
    parent.malloc(50);
    child.malloc(50);
    grandchild.malloc(50);
  }
  parent.clear();
  EXPECT_EQ(parent.bytesInUse(), 0u);
  EXPECT_LE(parent.footprint(), std::size_t{2} << 20) << "no more than the root's chunk cache";
  EXPECT_EQ(child.footprint(), 0u);
  EXPECT_EQ(grandchild.footprint(), 0u);
  EXPECT_EQ(grandchild.bytesInUse(), 0u);
  char* object = static_cast<char*>(grandchild.malloc(50));
  ASSERT_NE(object, nullptr);
  std::memset(object, 7, 50);
  EXPECT_GT(grandchild.footprint(), 0u);
}

TEST(Reap, DestroyingAParentWithLiveChildren) {
  auto parent = std::make_unique<Reap>();
  Reap* owned = parent->createChild();
  Reap* ownedGrandchild = owned->createChild();
  ASSERT_NE(ownedGrandchild, nullptr);
  for (int i = 0; i < 100; ++i) ownedGrandchild->malloc(1000);
  Reap unowned(*parent);
  unowned.malloc(1000);
  parent.reset();  // destroys the owned children; releases the unowned one
  EXPECT_TRUE(unowned.dead());
  EXPECT_EQ(unowned.parentReap(), nullptr);
  EXPECT_EQ(unowned.footprint(), 0u);
  EXPECT_EQ(unowned.malloc(10), nullptr) << "a dead reap allocates nothing";
  std::pmr::memory_resource* resource = &unowned;
  EXPECT_THROW((void)resource->allocate(10), std::bad_alloc);
}  // unowned's destructor runs after its parent's: nothing left to do

TEST(Reap, DeletingAnOwnedChildEarly) {
  Reap parent;
  Reap* child = parent.createChild();
  child->malloc(100);
  delete child;
  EXPECT_EQ(parent.firstChild(), nullptr);
  EXPECT_EQ(parent.bytesInUse(), 0u);
}

TEST(Reap, ModelCheckOnARootAndOnANestedReap) {
  for (std::uint64_t seed : {11u, 12u}) {
    Reap root;
    Reap child(root);
    Reap grandchild(child);
    for (Reap* reap : {&root, &grandchild}) {
      ModelChecker<Reap> checker(*reap, seed);
      ModelCheckOptions options;
      options.operations = 6000;
      checker.run(standardDistributions()[2], options);
      if (HasFatalFailure()) return;
      EXPECT_EQ(reap->bytesInUse(), 0u);
    }
    // Alternating: the child's own objects and the grandchild's chunks share the child.
    ModelChecker<Reap> parentChecker(child, seed + 100);
    ModelChecker<Reap> childChecker(grandchild, seed + 200);
    ModelCheckOptions options;
    options.operations = 2000;
    for (int round = 0; round < 3; ++round) {
      parentChecker.run(standardDistributions()[1], options);
      childChecker.run(standardDistributions()[0], options);
      grandchild.clear();
    }
  }
}

}  // namespace
}  // namespace heapkit::testing
