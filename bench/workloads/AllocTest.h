// alloctest: random replacement in a working set of 1000 objects of random sizes from
// 8 bytes to 16 KiB, after the alloc-test benchmark (Ignatchenko's, in mimalloc-bench):
// each step frees a random live object and allocates one of a fresh random size in its
// slot, then writes the new object (a word in each of its cache lines, as a program
// initialising it would touch them). Sizes are skewed toward small ones as in programs
// (and in alloc-test's logarithmic distribution): a band of one doubling is picked by
// weight, then a size uniformly within it:
//     8-16 B 16%, 16-32 B 16%, 32-64 B 16%, 64-128 B 14%, 128-256 B 12%, 256-512 B 9%,
//     512 B-1 KiB 6%, 1-2 KiB 4%, 2-4 KiB 3%, 4-8 KiB 2%, 8-16 KiB 2%,
// so 74% of requests are 8-256 bytes, the mean is about 650 bytes and the live data
// about 650 KB. The first and last words of every object are checked when it is freed,
// so a heap that hands out overlapping memory is caught.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "AllocatorPolicy.h"

namespace heapkit::workloads {

namespace alloctest_detail {

struct Band {
  std::uint32_t low;   // smallest size of the band
  std::uint32_t high;  // largest
  std::uint32_t weight;
};
inline constexpr std::array<Band, 11> kBands{{{8, 16, 16},
                                             {17, 32, 16},
                                             {33, 64, 16},
                                             {65, 128, 14},
                                             {129, 256, 12},
                                             {257, 512, 9},
                                             {513, 1024, 6},
                                             {1025, 2048, 4},
                                             {2049, 4096, 3},
                                             {4097, 8192, 2},
                                             {8193, 16384, 2}}};
inline constexpr std::uint32_t kTotalWeight = [] {
  std::uint32_t total = 0;
  for (const Band& band : kBands) total += band.weight;
  return total;
}();
static_assert(kTotalWeight == 100);

inline std::size_t randomSize(Rng& rng) {
  std::uint64_t bits = rng.next();
  auto pick = static_cast<std::uint32_t>((bits >> 32) % kTotalWeight);
  const Band* band = kBands.data();
  while (pick >= band->weight) pick -= (band++)->weight;
  return band->low + static_cast<std::size_t>((bits & 0xFFFFFFFFu) % (band->high - band->low + 1));
}

inline std::uint64_t stamp(std::uint64_t id) { return id * 0x9E3779B97F4A7C15ULL ^ 0xA110C7E57ULL; }

struct Slot {
  std::uint64_t* object = nullptr;
  std::size_t words = 0;  // whole words in the object (sizes are at least 8 bytes)
  std::uint64_t id = 0;
};

}  // namespace alloctest_detail

// scale: hundreds of thousands of replacements.
template <AllocatorPolicy A>
std::uint64_t runAllocTest(A& alloc, unsigned scale) {
  using namespace alloctest_detail;
  constexpr std::size_t kWorkingSet = 1000;
  constexpr std::size_t kWordsPerLine = 64 / sizeof(std::uint64_t);
  const std::uint64_t replacements = std::uint64_t{scale} * 100'000;

  Rng rng(0xA110C7E5);
  std::array<Slot, kWorkingSet> slots{};
  std::uint64_t nextId = 1, checksum = 0;
  auto fill = [&](Slot& slot) {
    std::size_t size = randomSize(rng);
    slot.object = static_cast<std::uint64_t*>(allocateOrThrow(alloc, size));
    slot.words = size / sizeof(std::uint64_t);
    slot.id = nextId++;
    std::uint64_t value = stamp(slot.id);
    for (std::size_t word = kWordsPerLine; word < slot.words; word += kWordsPerLine) slot.object[word] = value + word;
    slot.object[0] = value;
    slot.object[slot.words - 1] = value;
  };
  auto release = [&](Slot& slot) {
    std::uint64_t value = stamp(slot.id);
    require(slot.object[0] == value && slot.object[slot.words - 1] == value, "alloctest: an object was overwritten");
    checksum = mixChecksum(checksum, slot.id ^ (std::uint64_t{slot.words} << 40));
    alloc.deallocate(slot.object);
    slot.object = nullptr;
  };

  for (Slot& slot : slots) fill(slot);
  for (std::uint64_t step = 0; step < replacements; ++step) {
    Slot& slot = slots[rng.below(kWorkingSet)];
    release(slot);
    fill(slot);
  }
  for (Slot& slot : slots) release(slot);
  return checksum;
}

}  // namespace heapkit::workloads
