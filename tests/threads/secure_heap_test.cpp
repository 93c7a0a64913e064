// libheapkit-secure.so's composition as a layer stack: ScalableHeap over Secure<MmapHeap>
// under HardenedHeap (which stands on CanaryHeap there) and ANSIWrapper. Correct use
// never trips a check, and each misuse the secure tier claims stops the process with its
// line (tests/hardening runs the same misuse through the preloaded library).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

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

// libheapkit.so's free as the malloc wrapper runs it (src/wrapper/wrapper.cpp): the
// inline path, and what that passes on straight to the slow path (freeAfterInline), past
// HardenedHeap's and ScalableHeap::free's checks, which the wrapper never reaches then.
struct InlineThenAfterInline : HardenedHeap<ScalableHeap<Hardened<MmapHeap>>> {
  void free(void* object) {
    if (object == nullptr) return;  // the wrapper's own case
    freeInline(object, [this](void* other) { freeAfterInline(other); });
  }
};

// Every kind of block, freed by its owner and by other threads, through that route.
TEST(FreeAfterInline, ModelCheckAndRemoteFreesReturnEverything) {
  InlineThenAfterInline heap;
  testing::ModelChecker<InlineThenAfterInline> checker(heap, 7);
  testing::ModelCheckOptions options;
  options.operations = 6000;
  options.maxLiveObjects = 2000;
  for (const testing::SizeDistribution& sizes : testing::standardDistributions()) {
    SCOPED_TRACE(sizes.name);
    checker.run(sizes, options);
  }
  // Small, medium, large and aligned blocks (interior pointers) of this thread, freed by
  // another: the owner gets them back, so its heap's resident pages stop growing after
  // the first rounds (a remote free lost, or pushed onto the wrong list, would make every
  // round carve fresh pages).
  std::vector<std::size_t> resident;
  for (int round = 0; round < 6; ++round) {
    std::vector<void*> blocks;
    for (std::size_t size : {16, 24, 100, 1000, 4000, 16384, 20000, 100000, 300000, 5000000})
      for (int i = 0; i < 50; ++i) blocks.push_back(heap.malloc(size));
    for (int i = 0; i < 50; ++i) blocks.push_back(heap.memalign(64, 48));
    for (void* block : blocks) ASSERT_NE(block, nullptr);
    std::thread([&] {
      for (void* block : blocks) heap.free(block);
    }).join();
    resident.push_back(heap.residentBytes());
  }
  // A lost round is 1.2 MiB of fresh pages; a delayed purge may lower the count.
  EXPECT_LE(resident[5], resident[2] + 256 * 1024);
  std::vector<void*> again;
  for (int i = 0; i < 2000; ++i) again.push_back(heap.malloc(100));
  for (void* block : again) heap.free(block);
}

// The hardening of that route: the slow path checks what HardenedHeap would have.
TEST(FreeAfterInlineDeathTest, MisuseByAnotherThreadIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        InlineThenAfterInline heap;
        sink = static_cast<char*>(heap.malloc(100));
        std::thread([&] { heap.free(sink + 8); }).join();  // not 16-aligned
      },
      "heapkit: free\\(\\): invalid pointer 0x");
  EXPECT_DEATH(
      {
        InlineThenAfterInline heap;
        sink = static_cast<char*>(heap.malloc(100));
        std::thread([&] { heap.free(sink + 16); }).join();  // inside the object
      },
      "heapkit: free\\(\\): invalid pointer 0x");
  EXPECT_DEATH(
      {
        InlineThenAfterInline heap;
        sink = static_cast<char*>(heap.malloc(100));
        std::thread([&] {
          heap.free(sink);
          heap.free(sink);
        }).join();
      },
      "heapkit: free\\(\\): double free of 0x");
}

// Superblock::isObjectStart, the slow free's check that a pointer starts an object,
// against a division, for every class: every 8 bytes of a superblock's slice from its
// head to the next slice's first bytes, the tail past the last whole object included (a
// multiple of the size there would overlap the next slice's head).
TEST(SuperblockObjectStart, ExactForEveryClass) {
  ScalableHeap<Hardened<MmapHeap>> heap;
  for (std::size_t sizeClass = 0; sizeClass < ScalableSizeClasses::count(); ++sizeClass) {
    std::size_t size = ScalableSizeClasses::bytesOf(sizeClass);
    SCOPED_TRACE(size);
    void* object = heap.malloc(size);
    ASSERT_NE(object, nullptr);
    const Superblock* sb = Superblock::of(object);
    ASSERT_EQ(sb->objectBytes, size);
    auto base = Superblock::baseOf(sb);
    auto first = reinterpret_cast<std::uintptr_t>(sb->firstObject);
    std::uintptr_t objects = (base + superblock::kBytes - first) / size;
    std::size_t starts = 0;
    for (std::uintptr_t address = base; address < base + superblock::kBytes + 64; address += 8) {
      bool expected = address >= first && (address - first) % size == 0 && (address - first) / size < objects;
      starts += expected;
      ASSERT_EQ(sb->isObjectStart(reinterpret_cast<void*>(address)), expected) << "offset " << address - base;
    }
    EXPECT_EQ(starts, objects);
    heap.free(object);
  }
}

}  // namespace
}  // namespace heapkit
