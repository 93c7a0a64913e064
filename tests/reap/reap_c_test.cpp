// The C library (include/heapkit/reap.h), linked in its checked variant so that misuse
// reports are tested in every build type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "heapkit/reap.h"

namespace {

std::vector<std::string> reports;
void recordReport(const char* message) { reports.emplace_back(message); }

class ReapC : public ::testing::Test {
 protected:
  void SetUp() override {
    reports.clear();
    reap_set_error_handler(recordReport);
  }
  void TearDown() override { reap_set_error_handler(nullptr); }
};

reap_stats_t statsOf(reap_t* reap) {
  reap_stats_t stats{};
  EXPECT_EQ(reap_get_stats(reap, &stats), 0);
  return stats;
}

TEST_F(ReapC, MallocCallocReallocFreeAndUsableSize) {
  reap_t* reap = reap_create(nullptr);
  ASSERT_NE(reap, nullptr);
  char* text = static_cast<char*>(reap_malloc(reap, 6));
  std::memcpy(text, "hello", 6);
  EXPECT_GE(reap_usable_size(reap, text), 6u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(text) % 16, 0u);

  // calloc zeroes even memory that held something before.
  std::memset(reap_malloc(reap, 1000), 0xAB, 1000);
  auto* zeros = static_cast<unsigned char*>(reap_calloc(reap, 250, 4));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(zeros[i], 0);
  reap_free(reap, zeros);
  zeros = static_cast<unsigned char*>(reap_calloc(reap, 100, 10));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(zeros[i], 0);

  char* grown = static_cast<char*>(reap_realloc(reap, text, 5000));
  EXPECT_STREQ(grown, "hello");
  EXPECT_EQ(reap_realloc(reap, grown, 0), nullptr);
  EXPECT_GT(statsOf(reap).bytes_in_use, 0u);
  reap_free(reap, zeros);
  EXPECT_GT(statsOf(reap).bytes_in_use, 0u) << "the first 1000-byte object is still live";
  reap_free(reap, nullptr);
  reap_destroy(reap);
  EXPECT_TRUE(reports.empty());
}

TEST_F(ReapC, ImpossibleSizesGiveNullAndErrno) {
  reap_t* reap = reap_create(nullptr);
  errno = 0;
  EXPECT_EQ(reap_malloc(reap, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(reap_calloc(reap, SIZE_MAX / 2, 3), nullptr) << "count * size overflows";
  EXPECT_EQ(errno, ENOMEM);
  void* object = reap_malloc(reap, 10);
  errno = 0;
  EXPECT_EQ(reap_realloc(reap, object, SIZE_MAX - 8), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_NE(reap_usable_size(reap, object), 0u) << "a failed realloc leaves the object alone";
  errno = 0;
  EXPECT_EQ(reap_malloc(nullptr, 10), nullptr);
  EXPECT_EQ(errno, EINVAL);
  reap_stats_t stats;
  EXPECT_EQ(reap_get_stats(nullptr, &stats), -1);
  reap_destroy(nullptr);
  reap_free_all(nullptr);
  reap_destroy(reap);
  EXPECT_TRUE(reports.empty());
}

TEST_F(ReapC, PerObjectFreeThenReuse) {
  reap_t* reap = reap_create(nullptr);
  std::vector<void*> objects;
  for (int i = 0; i < 1000; ++i) objects.push_back(reap_malloc(reap, 64));
  std::size_t footprint = statsOf(reap).footprint;
  for (int round = 0; round < 10; ++round) {
    for (void* object : objects) reap_free(reap, object);
    EXPECT_EQ(statsOf(reap).bytes_in_use, 0u);
    for (void*& object : objects) object = reap_malloc(reap, 64);
  }
  EXPECT_EQ(statsOf(reap).footprint, footprint) << "freed objects were reused, nothing new bumped";
  reap_destroy(reap);
}

// The program, scaled down: phases of 20 000 objects of one size, each freed
// whole before the next. Freed space must serve the later sizes, so the peak footprint
// stays near the largest phase (8.3 MB of blocks) rather than the sum of them.
TEST_F(ReapC, PhasesOfDifferentSizesReuseEachOthersSpace) {
  reap_t* reap = reap_create(nullptr);
  std::size_t largestPhase = 0;
  std::vector<void*> objects(20000);
  for (std::size_t size : {24, 48, 100, 200, 400, 96, 40}) {
    for (void*& object : objects) {
      object = reap_malloc(reap, size);
      ASSERT_NE(object, nullptr);
      std::memset(object, 2, size);
    }
    largestPhase = std::max(largestPhase, statsOf(reap).bytes_in_use);
    for (void* object : objects) reap_free(reap, object);
  }
  EXPECT_LT(statsOf(reap).peak_footprint, largestPhase * 12 / 10) << "largest phase " << largestPhase;
  reap_destroy(reap);
  EXPECT_TRUE(reports.empty());
}

TEST_F(ReapC, FreeAllThenReuseAndNesting) {
  reap_t* root = reap_create(nullptr);
  reap_t* child = reap_create(root);
  reap_t* grandchild = reap_create(child);
  ASSERT_NE(grandchild, nullptr);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 2000; ++i) {
      std::memset(reap_malloc(grandchild, 40), round, 40);
      std::memset(reap_malloc(child, 40), round, 40);
    }
    EXPECT_GT(statsOf(root).footprint, 2000u * 80);
    reap_free_all(root);  // the children too
    EXPECT_LE(statsOf(root).footprint, std::size_t{2} << 20) << "no more than the root's chunk cache";
    EXPECT_EQ(statsOf(child).footprint, 0u);
    EXPECT_EQ(statsOf(root).bytes_in_use, 0u);
    EXPECT_EQ(statsOf(grandchild).bytes_in_use, 0u);
  }
  EXPECT_GT(statsOf(root).peak_footprint, 2000u * 80);
  // Destroying a parent with live children destroys them.
  reap_malloc(grandchild, 100);
  reap_destroy(child);
  EXPECT_TRUE(reports.empty());
  EXPECT_EQ(reap_malloc(grandchild, 10), nullptr);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("not a live reap"), std::string::npos) << reports[0];
  EXPECT_EQ(statsOf(root).bytes_in_use, 0u);
  reap_destroy(root);
}

TEST_F(ReapC, MisuseIsReportedNotCorrupting) {
  ASSERT_TRUE(reap_checks_enabled());
  reap_t* a = reap_create(nullptr);
  reap_t* b = reap_create(nullptr);
  void* object = reap_malloc(a, 32);
  void* neighbour = reap_malloc(a, 32);
  std::memset(neighbour, 0x5A, 32);

  reap_free(b, object);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("belongs to reap"), std::string::npos) << reports[0];

  reap_free(a, object);
  reap_free(a, object);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_NE(reports[1].find("double free"), std::string::npos) << reports[1];

  int onTheStack[8] = {};
  reap_free(a, &onTheStack[4]);
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_NE(reports[2].find("not allocated by reap"), std::string::npos) << reports[2];

  EXPECT_EQ(reap_usable_size(b, neighbour), 0u);
  EXPECT_EQ(reports.size(), 4u);

  reap_destroy(b);
  EXPECT_EQ(reap_malloc(b, 10), nullptr);
  reap_free_all(b);
  reap_destroy(b);
  EXPECT_EQ(reports.size(), 7u);
  for (std::size_t i = 4; i < 7; ++i) EXPECT_NE(reports[i].find("not a live reap"), std::string::npos) << reports[i];

  // None of it touched a's objects or free lists.
  for (int i = 0; i < 32; ++i) ASSERT_EQ(static_cast<unsigned char*>(neighbour)[i], 0x5A);
  void* reused = reap_malloc(a, 32);
  EXPECT_EQ(reused, object);
  EXPECT_NE(reap_malloc(a, 32), reused);
  reap_destroy(a);
}

TEST_F(ReapC, ThePapersInterface) {
  void* parent = nullptr;
  void* child = nullptr;
  reapCreate(&parent, nullptr);
  reapCreate(&child, &parent);
  ASSERT_NE(parent, nullptr);
  ASSERT_NE(child, nullptr);
  char* object = static_cast<char*>(reapMalloc(&child, 100));
  std::strcpy(object, "reap");
  reapFree(&child, object);
  EXPECT_EQ(reapMalloc(&child, 100), object);
  reapFreeAll(&parent);
  reap_stats_t stats;
  reap_get_stats(static_cast<reap_t*>(child), &stats);
  EXPECT_EQ(stats.footprint, 0u);
  reapDestroy(&parent);
  EXPECT_EQ(parent, nullptr);
  EXPECT_EQ(reapMalloc(nullptr, 10), nullptr);
  EXPECT_TRUE(reports.empty());
}

}  // namespace
