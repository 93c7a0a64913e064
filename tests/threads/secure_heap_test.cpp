// libheapkit-secure.so's composition as a layer stack: ScalableHeap over Secure<MmapHeap>
// under HardenedHeap (which stands on CanaryHeap there) and ANSIWrapper. Correct use
// never trips a check, and each misuse the secure tier claims stops the process with its
// line (tests/hardening runs the same misuse through the preloaded library).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <cstring>
#include <random>

#include "heapkit/threads/ScalableHeap.h"
#include "heapkit/utility/HardenedHeap.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "support/ModelCheck.h"

namespace heapkit {
namespace {

// A guard page's fault ends the process by SIGSEGV; under AddressSanitizer, which catches
// the signal, by its report of the SEGV and exit status 1.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif
bool diedOfAFault(int status) {
  return kUnderAddressSanitizer ? ::testing::ExitedWithCode(1)(status) : ::testing::KilledBySignal(SIGSEGV)(status);
}
constexpr const char* kFaultReport = kUnderAddressSanitizer ? "SEGV on unknown address" : "";

using SecureStack = ANSIWrapper<HardenedHeap<ScalableHeap<Secure<MmapHeap>>>>;
using DefaultStack = ANSIWrapper<HardenedHeap<ScalableHeap<Hardened<MmapHeap>>>>;

static_assert(secure<ScalableHeap<Secure<MmapHeap>>>() && !secure<ScalableHeap<Hardened<MmapHeap>>>());
// The canaries are there only over a secure top: the default stack has no CanaryHeap.
static_assert(std::is_base_of_v<CanaryHeap<ScalableHeap<Secure<MmapHeap>>>, HardenedHeap<ScalableHeap<Secure<MmapHeap>>>>);
static_assert(!std::is_base_of_v<CanaryHeap<ScalableHeap<Hardened<MmapHeap>>>, HardenedHeap<ScalableHeap<Hardened<MmapHeap>>>>);

char* volatile sink;  // keeps the compiler from folding the misuse below

// Below ANSIWrapper (whose realloc(p, 0) frees, which the model does not expect).
TEST(SecureHeap, ModelCheckCorrectUseNeverTrips) {
  using Checked = HardenedHeap<ScalableHeap<Secure<MmapHeap>>>;
  Checked heap;
  testing::ModelChecker<Checked> checker(heap, 21);
  testing::ModelCheckOptions options;
  options.operations = 6000;
  std::vector<testing::SizeDistribution> distributions = testing::standardDistributions();
  distributions.push_back({"huge", [](std::mt19937_64& rng) {
                             return std::uniform_int_distribution<std::size_t>(512 * 1024, 3 * 1024 * 1024)(rng);
                           }});
  for (const testing::SizeDistribution& sizes : distributions) {
    SCOPED_TRACE(sizes.name);
    bool huge = sizes.name == "huge";  // mapped and unmapped each time: fewer
    options.maxLiveObjects = huge ? 20 : 2000;
    options.operations = huge ? 400 : 6000;
    checker.run(sizes, options);
  }
}

TEST(SecureHeap, GetSizeIsTheRequestAndAlignedObjectsWork) {
  SecureStack heap;
  for (std::size_t size : {std::size_t{1}, std::size_t{24}, std::size_t{1000}, std::size_t{100 * 1024},
                           std::size_t{4 * 1024 * 1024}}) {
    void* object = heap.malloc(size);
    ASSERT_NE(object, nullptr);
    EXPECT_EQ(heap.getSize(object), size);
    std::memset(object, 0x5a, size);
    heap.free(object);
    for (std::size_t alignment : {std::size_t{32}, std::size_t{4096}, std::size_t{64 * 1024}}) {
      void* aligned = heap.memalign(alignment, size);
      ASSERT_NE(aligned, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned) % alignment, 0u);
      EXPECT_EQ(heap.getSize(aligned), size);
      std::memset(aligned, 0x5a, size);
      heap.free(aligned);
    }
  }
}

// Each death test runs in a child with its own heap.
TEST(SecureHeapDeathTest, OverflowAndUnderflowStopAtFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (std::size_t size : {std::size_t{24}, std::size_t{100 * 1024}, std::size_t{4 * 1024 * 1024}}) {
    SCOPED_TRACE(size);
    EXPECT_DEATH(
        {
          SecureStack heap;
          sink = static_cast<char*>(heap.malloc(size));
          sink[size] ^= 1;  // a byte changed: a write of the trailer's own value is no overflow to see
          heap.free(sink);
        },
        "heapkit: free\\(\\): heap overflow after the block at 0x");
    EXPECT_DEATH(
        {
          SecureStack heap;
          sink = static_cast<char*>(heap.malloc(size));
          std::memset(sink - 32, 1, 32);
          heap.free(sink);
        },
        "heapkit: free\\(\\): invalid pointer or underflow before 0x");
  }
}

TEST(SecureHeapDeathTest, DoubleFreeAndWriteAfterFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        SecureStack heap;
        void* object = heap.malloc(100 * 1024);
        heap.free(object);
        heap.free(object);
      },
      "heapkit: free\\(\\): double free of 0x");
  EXPECT_DEATH(
      {
        SecureStack heap;
        sink = static_cast<char*>(heap.malloc(24));
        heap.free(sink);
        sink[0] = 1;
        heap.malloc(24);
      },
      "heapkit: malloc\\(\\): write after free to 0x");
}

TEST(SecureHeapDeathTest, LargeBlocksHaveGuardsAndAreUnmappedWhenFreed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr std::size_t kSize = 4 * 1024 * 1024;
  EXPECT_EXIT(
      {
        SecureStack heap;
        sink = static_cast<char*>(heap.malloc(kSize));
        std::memset(sink + kSize, 1, 8192);
      },
      diedOfAFault, kFaultReport);
  EXPECT_EXIT(
      {
        SecureStack heap;
        sink = static_cast<char*>(heap.malloc(kSize));
        heap.free(sink);
        sink[0] = 1;
      },
      diedOfAFault, kFaultReport);
  // The default library keeps the freed block (no fault): what the secure tier adds.
  DefaultStack heap;
  sink = static_cast<char*>(heap.malloc(kSize));
  heap.free(sink);
  sink[0] = 1;
}

}  // namespace
}  // namespace heapkit
