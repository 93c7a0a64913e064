// ReservedArena where the address space is limited (a `ulimit -v`, or valgrind, which
// allows less than the 64 GiB it reserves by default): it reserves the largest half,
// quarter... that fits and serves requests from it, rather than failing every one (a built
// design's malloc then failed at its first call under valgrind).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "heapkit/top/ArenaHeap.h"

namespace heapkit {
namespace {

// In a child process whose address space is limited to `limitBytes`: 0 when the default
// arena reserved a range within the limit and an extent of it could be written, else why not.
// (Unused under ASan, whose shadow memory no limit here leaves room for.)
[[maybe_unused]] int reserveUnderLimit(std::size_t limitBytes) {
  rlimit limit{limitBytes, limitBytes};
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 10;
  ReservedArena<RealMemory> arena;
  if (arena.reservedBytes() == 0) return 11;
  if (arena.reservedBytes() >= limitBytes) return 12;
  if (arena.reservedBytes() < ReservedArena<RealMemory>::kMinReserveBytes) return 13;
  std::size_t bytes = std::size_t{1} << 20;
  void* extent = arena.obtain(bytes, 1);
  if (extent == nullptr) return 14;
  std::memset(extent, 1, bytes);
  if (arena.ownerOf(extent) != 1) return 15;
  arena.release(extent, bytes);
  return 0;
}

TEST(ReservedArena, ReservesWhatALimitedAddressSpaceAllows) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's shadow memory needs more address space than any limit here";
#else
  for (std::size_t gib : {std::size_t{6}, std::size_t{12}, std::size_t{40}}) {
    SCOPED_TRACE(gib);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) _exit(reserveUnderLimit(gib << 30));
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
#endif
}

TEST(ReservedArena, ReservesTheWholeRangeWhenItCan) {
  ReservedArena<RealMemory> arena(std::size_t{1} << 30);
  EXPECT_EQ(arena.reservedBytes(), std::size_t{1} << 30);
}

}  // namespace
}  // namespace heapkit
