// ANSIWrapper gives every composition glibc's semantics: checked over heaps with native
// memalign (ScalableHeap) and over heaps that keep size words (Kingsley, Lea, PHO).
// Plain C++ objects, no interposition, so this runs under ASan too.
#include <errno.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "heapkit/building/FreelistHeap.h"
#include "heapkit/general/ScalableCoreHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/threads/LockedHeap.h"
#include "heapkit/threads/PHOThreadHeap.h"
#include "heapkit/threads/ScalableHeap.h"
#include "heapkit/utility/HardenedHeap.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

using Kingsley = ANSIWrapper<LockedHeap<SpinLock, KingsleyHeap<AuditedTop>>>;
using Lea = ANSIWrapper<LeaHeap<AuditedTop>>;
using Pho = ANSIWrapper<PHOThreadHeap<2, LockedHeap<SpinLock, LeaHeap<AuditedTop>>>>;
using Scalable = ANSIWrapper<ScalableHeap<AuditedTop>>;

// HardenedHeap leaves its alignment test out only where the heap's own free checks every
// pointer first: hardened Kingsley (the cookie), behind its lock (libheapkit-kingsley.so);
// not unhardened, not Lea (size words, no key), and not a layer that inherits the claim
// without making the check (a free list over Kingsley keeps pointers unchecked).
static_assert(freeChecksPointers<LockedHeap<SpinLock, KingsleyHeap<Hardened<MmapHeap>>>>());
static_assert(!freeChecksPointers<LockedHeap<SpinLock, KingsleyHeap<MmapHeap>>>());
static_assert(!freeChecksPointers<LockedHeap<SpinLock, LeaHeap<Hardened<MmapHeap>>>>());
static_assert(!freeChecksPointers<FreelistHeap<KingsleyHeap<Hardened<MmapHeap>>>>());
static_assert(!freeChecksPointers<LockedHeap<SpinLock, FreelistHeap<KingsleyHeap<Hardened<MmapHeap>>>>>());

template <class H>
class ANSIWrapperTest : public ::testing::Test {
 protected:
  H heap;
};
using Heaps = ::testing::Types<Kingsley, Lea, Pho, Scalable>;
TYPED_TEST_SUITE(ANSIWrapperTest, Heaps);

bool aligned(void* ptr, std::size_t alignment) { return reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0; }

TYPED_TEST(ANSIWrapperTest, MallocZeroIsUniqueAndAligned) {
  void* a = this->heap.malloc(0);
  void* b = this->heap.malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_TRUE(aligned(a, 16) && aligned(b, 16));
  this->heap.free(a);
  this->heap.free(b);
  this->heap.free(nullptr);
  EXPECT_EQ(this->heap.getSize(nullptr), 0u);
}

TYPED_TEST(ANSIWrapperTest, HugeRequestsFailWithENOMEM) {
  for (std::size_t size : {SIZE_MAX, SIZE_MAX - 4096, std::size_t{PTRDIFF_MAX} + 1, std::size_t{PTRDIFF_MAX}}) {
    errno = 0;
    EXPECT_EQ(this->heap.malloc(size), nullptr) << size;
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT_EQ(this->heap.memalign(64, size), nullptr);
    EXPECT_EQ(errno, ENOMEM);
  }
}

TYPED_TEST(ANSIWrapperTest, CallocZeroesAndChecksOverflow) {
  auto* dirty = static_cast<unsigned char*>(this->heap.malloc(4000));
  std::memset(dirty, 0xff, 4000);
  this->heap.free(dirty);  // likely handed out again below: calloc must clear it
  auto* zeroed = static_cast<unsigned char*>(this->heap.calloc(100, 40));
  ASSERT_NE(zeroed, nullptr);
  for (int i = 0; i < 4000; ++i) ASSERT_EQ(zeroed[i], 0) << i;
  this->heap.free(zeroed);
  errno = 0;
  EXPECT_EQ(this->heap.calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(this->heap.calloc(std::size_t{1} << 32, std::size_t{1} << 32), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* empty = this->heap.calloc(0, 10);
  EXPECT_NE(empty, nullptr);
  this->heap.free(empty);
}

TYPED_TEST(ANSIWrapperTest, ReallocGrowsShrinksAndKeepsContents) {
  auto* p = static_cast<unsigned char*>(this->heap.realloc(nullptr, 10));  // NULL: malloc
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 10; ++i) p[i] = static_cast<unsigned char>(i);
  std::size_t size = 10;
  for (std::size_t next : {100, 5000, 70000, 300000, 2000000, 50, 7}) {
    p = static_cast<unsigned char*>(this->heap.realloc(p, next));
    ASSERT_NE(p, nullptr);
    for (std::size_t i = 0; i < std::min<std::size_t>({size, next, 10}); ++i) ASSERT_EQ(p[i], i);
    EXPECT_GE(this->heap.getSize(p), next);
    size = next;
  }
  // In place while the block stays at least half used.
  void* same = this->heap.realloc(p, this->heap.getSize(p));
  EXPECT_EQ(same, p);
  // A failed realloc leaves the block alone.
  errno = 0;
  EXPECT_EQ(this->heap.realloc(p, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  for (std::size_t i = 0; i < 7; ++i) ASSERT_EQ(p[i], i);
  // Size 0 frees and returns NULL, as glibc does.
  EXPECT_EQ(this->heap.realloc(p, 0), nullptr);
  errno = 0;
  EXPECT_EQ(this->heap.reallocarray(nullptr, SIZE_MAX / 4, 8), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* array = this->heap.reallocarray(nullptr, 10, 8);
  EXPECT_GE(this->heap.getSize(array), 80u);
  this->heap.free(array);
}

TYPED_TEST(ANSIWrapperTest, EveryAlignment) {
  std::vector<void*> live;
  for (std::size_t alignment = 1; alignment <= (std::size_t{1} << 21); alignment *= 2) {
    for (std::size_t size : {0, 1, 24, 1000, 40000, 200000}) {
      void* p = this->heap.memalign(alignment, size);
      ASSERT_NE(p, nullptr) << alignment << " " << size;
      EXPECT_TRUE(aligned(p, std::max<std::size_t>(alignment, 16))) << alignment;
      EXPECT_GE(this->heap.getSize(p), size);
      std::memset(p, 0x5a, size);
      live.push_back(p);
      if (live.size() > 8) {
        this->heap.free(live.front());
        live.erase(live.begin());
      }
    }
  }
  // Aligned blocks also realloc correctly (the real object is found behind the tag).
  void* p = this->heap.memalign(256, 100);
  std::memset(p, 7, 100);
  auto* q = static_cast<unsigned char*>(this->heap.realloc(p, 100000));
  for (int i = 0; i < 100; ++i) ASSERT_EQ(q[i], 7);
  live.push_back(q);
  for (void* ptr : live) this->heap.free(ptr);
  // memalign rounds an alignment that is no power of two up, as glibc does.
  void* odd = this->heap.memalign(48, 10);
  EXPECT_TRUE(aligned(odd, 64));
  this->heap.free(odd);
  errno = 0;
  EXPECT_EQ(this->heap.memalign(SIZE_MAX, 10), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TYPED_TEST(ANSIWrapperTest, PosixMemalignAlignedAllocVallocPvalloc) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(this->heap.posix_memalign(&p, 24, 10), EINVAL);
  EXPECT_EQ(this->heap.posix_memalign(&p, 4, 10), EINVAL) << "less than sizeof(void*)";
  EXPECT_EQ(this->heap.posix_memalign(&p, 0, 10), EINVAL);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1)) << "left alone on error";
  errno = 0;
  EXPECT_EQ(this->heap.posix_memalign(&p, 64, SIZE_MAX), ENOMEM);
  EXPECT_EQ(errno, 0) << "posix_memalign reports errors by its result only";
  ASSERT_EQ(this->heap.posix_memalign(&p, 128, 1000), 0);
  EXPECT_TRUE(aligned(p, 128));
  this->heap.free(p);

  errno = 0;
  EXPECT_EQ(this->heap.aligned_alloc(24, 48), nullptr);
  EXPECT_EQ(errno, EINVAL);
  p = this->heap.aligned_alloc(4096, 4096);
  EXPECT_TRUE(aligned(p, 4096));
  this->heap.free(p);

  std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  p = this->heap.valloc(10);
  EXPECT_TRUE(aligned(p, page));
  this->heap.free(p);
  p = this->heap.pvalloc(0);
  EXPECT_TRUE(aligned(p, page));
  EXPECT_GE(this->heap.getSize(p), page);
  this->heap.free(p);
  p = this->heap.pvalloc(page + 1);
  EXPECT_GE(this->heap.getSize(p), 2 * page);
  this->heap.free(p);
  errno = 0;
  EXPECT_EQ(this->heap.pvalloc(SIZE_MAX - 10), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

// The model check treats a NULL from realloc as failure; realloc(p, 0) returns NULL by
// design (tested above), so the check asks for one byte instead.
template <class H>
struct ReallocZeroAsOne : H {
  void* realloc(void* ptr, std::size_t size) { return H::realloc(ptr, size == 0 ? 1 : size); }
};

TYPED_TEST(ANSIWrapperTest, ModelCheck) {
  ReallocZeroAsOne<TypeParam> heap;
  for (const SizeDistribution& sizes : standardDistributions()) {
    SCOPED_TRACE(sizes.name);
    ModelChecker<ReallocZeroAsOne<TypeParam>> checker(heap, 7);
    ModelCheckOptions options;
    options.operations = 3000;
    checker.run(sizes, options);
  }
}

// ---- realloc's copy leaves never-written pages alone -------------------------------------

// Every block a mapping of its own, fresh from the OS: its pages read as zero, which
// bytesToClear says when `fresh` (a heap that cannot say so has no bytesToClear).
template <bool kSaysFresh>
struct FreshMappingHeap {
  static constexpr std::size_t Alignment = kMinAlignment;
  std::map<void*, std::size_t> sizes;
  void* malloc(std::size_t size) {
    std::size_t bytes = alignUp(size == 0 ? 1 : size, pageSize());
    void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) return nullptr;
    sizes[block] = bytes;
    return block;
  }
  void free(void* block) {
    if (block == nullptr) return;
    munmap(block, sizes.at(block));
    sizes.erase(block);
  }
  std::size_t getSize(void* block) { return sizes.at(block); }
  void* memalign(std::size_t alignment, std::size_t size) { return alignment <= pageSize() ? malloc(size) : nullptr; }
  std::size_t bytesToClear(void*, std::size_t)
    requires kSaysFresh
  {
    return 0;
  }
};

// Which of the `pages` pages from `block` are resident (mincore).
std::vector<bool> residentPages(void* block, std::size_t pages) {
  std::vector<unsigned char> status(pages);
  EXPECT_EQ(mincore(block, pages * pageSize(), status.data()), 0);
  std::vector<bool> resident(pages);
  for (std::size_t i = 0; i < pages; ++i) resident[i] = (status[i] & 1) != 0;
  return resident;
}

TEST(ANSIWrapperRealloc, PagesNeverWrittenStayOutOfTheResidentSet) {
  ANSIWrapper<FreshMappingHeap<true>> heap;
  const std::size_t page = pageSize();
  auto* old = static_cast<unsigned char*>(heap.malloc(16 * page));
  ASSERT_NE(old, nullptr);
  old[0] = 1;               // the program wrote page 0 and the end of page 5, nothing else
  old[6 * page - 1] = 2;
  auto* moved = static_cast<unsigned char*>(heap.realloc(old, 64 * page));
  ASSERT_NE(moved, nullptr);
  std::vector<bool> resident = residentPages(moved, 64);
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(resident[i], i == 0 || i == 5) << "page " << i;
  for (std::size_t i = 0; i < 16 * page; ++i) {
    unsigned char expected = i == 0 ? 1 : i == 6 * page - 1 ? 2 : 0;
    ASSERT_EQ(moved[i], expected) << "byte " << i;
  }
  heap.free(moved);
}

TEST(ANSIWrapperRealloc, AHeapThatCannotSayWhatIsFreshGetsEveryByteCopied) {
  ANSIWrapper<FreshMappingHeap<false>> heap;
  const std::size_t page = pageSize();
  auto* old = static_cast<unsigned char*>(heap.malloc(4 * page));
  ASSERT_NE(old, nullptr);
  old[0] = 1;
  auto* moved = static_cast<unsigned char*>(heap.realloc(old, 8 * page));
  ASSERT_NE(moved, nullptr);
  std::vector<bool> resident = residentPages(moved, 8);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(resident[i]) << "page " << i;  // copied, zeros too
  EXPECT_EQ(moved[0], 1);
  heap.free(moved);
}

// The same through libheapkit.so's composition: a buffer grown by reallocs in a row, as
// sqlite3 grows one from 16 KiB to 2 MiB, is fresh spans whose unwritten pages stay so;
// and, with spans only up to 64 KiB and no cache of large blocks (a design tune may
// build), fresh blocks of their own.
void reallocChainWritesOnlyWhatTheProgramWrote(ANSIWrapper<ScalableCoreHeap<>>& heap) {
  const std::size_t page = pageSize();
  auto* buffer = static_cast<unsigned char*>(heap.malloc(16 * 1024));
  ASSERT_NE(buffer, nullptr);
  std::memset(buffer, 7, 100);
  for (std::size_t size = 32 * 1024; size <= 2 * 1024 * 1024; size *= 2) {
    buffer = static_cast<unsigned char*>(heap.realloc(buffer, size));
    ASSERT_NE(buffer, nullptr);
  }
  for (std::size_t i = 0; i < 100; ++i) ASSERT_EQ(buffer[i], 7);
  auto start = reinterpret_cast<std::uintptr_t>(buffer) & ~(page - 1);
  std::size_t pages = 2 * 1024 * 1024 / page;
  std::vector<bool> resident = residentPages(reinterpret_cast<void*>(start), pages);
  std::size_t count = 0;
  for (bool r : resident) count += r;
  EXPECT_LE(count, 2u) << "of " << pages << " pages";  // the first (data and header), not the rest
  heap.free(buffer);
}

TEST(ANSIWrapperRealloc, AChainOfReallocsThroughSpansWritesOnlyWhatTheProgramWrote) {
  ANSIWrapper<ScalableCoreHeap<>> heap;
  reallocChainWritesOnlyWhatTheProgramWrote(heap);
}

TEST(ANSIWrapperRealloc, AChainOfReallocsThroughBlocksOfTheirOwnWritesOnlyWhatTheProgramWrote) {
  ScalableCoreConfig config;
  config.large.spanMaxBytes = 64 * 1024;
  config.cache = CacheLimits{0, SIZE_MAX, 1, 1};
  ANSIWrapper<ScalableCoreHeap<>> heap(config);
  reallocChainWritesOnlyWhatTheProgramWrote(heap);
}

}  // namespace
}  // namespace heapkit::testing
