// SegregatedFreeLists: free blocks in one LIFO list per size class, and a one-word
// bitmap of the classes that have any. What a reap needs for the objects it frees, and
// nothing more: no coalescing, no per-class parent, no destructor (a reap keeps it
// inside its own chunks and drops it with them).
//
// 64 classes: 16-byte steps below 512 bytes, then four per power of two up to 160 KiB
// (as TLSF: a class holds the blocks whose size is at least its lower bound and below
// the next one's). A block goes into the class of its size, rounded down; a request
// searches from the class of its size rounded up, where every block is big enough, so a
// request costs one mask and one count-trailing-zeros: the smallest non-empty class that
// fits, with no list walk and no bitmap loop. (The branches these save are what a reap
// pays most for in heap mode: sizes are random, so they are mispredicted.)
//
// Each list links through the first word of its blocks, so a block must be at least a
// pointer big; sizes are multiples of 16 and at least 16. The caller passes each block's
// size; the lists never read a block's header.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace heapkit {

namespace free_list_classes {
inline constexpr std::size_t kLinearLimit = 512;  // 16-byte classes below this

constexpr std::size_t roundingDown(std::size_t bytes) {
  if (bytes < kLinearLimit) return (bytes >> 4) - 1;
  std::size_t log2 = static_cast<std::size_t>(std::bit_width(bytes)) - 1;
  return 31 + ((log2 - 9) << 2) + ((bytes >> (log2 - 2)) & 3);
}

constexpr std::size_t roundingUp(std::size_t bytes) {
  if (bytes < kLinearLimit) return roundingDown(bytes);
  // Round up to the next class bound: a quarter of the power of two below.
  std::size_t step = std::size_t{1} << (static_cast<std::size_t>(std::bit_width(bytes)) - 3);
  return roundingDown((bytes + step - 1) & ~(step - 1));
}

// Sizes below this (most requests) find their class in a table: the formulas branch on
// the size, and sizes are random, so the branches would be mispredicted.
inline constexpr std::size_t kTableLimit = 16 * 1024;
using ClassTable = std::array<std::uint8_t, kTableLimit / 16>;
template <std::size_t (*Formula)(std::size_t)>
constexpr ClassTable tabulate() {
  ClassTable table{};
  for (std::size_t index = 1; index < table.size(); ++index) table[index] = static_cast<std::uint8_t>(Formula(index * 16));
  return table;
}
inline constexpr ClassTable kDownTable = tabulate<roundingDown>();
inline constexpr ClassTable kUpTable = tabulate<roundingUp>();
static_assert(roundingUp(kTableLimit - 16) < 64, "every size in the tables has a class");
}  // namespace free_list_classes

class SegregatedFreeLists {
 public:
  static constexpr std::size_t kClasses = 64;
  // Blocks must be smaller than this (the last class's upper bound).
  static constexpr std::size_t kMaxBlockBytes = 160 * 1024;

  SegregatedFreeLists() = default;
  SegregatedFreeLists(const SegregatedFreeLists&) = delete;
  SegregatedFreeLists& operator=(const SegregatedFreeLists&) = delete;

  // A block of at least `bytes`, unlinked; nullptr when none is free.
  void* take(std::size_t bytes) {
    using namespace free_list_classes;
    std::size_t sizeClass;
    if (bytes < kTableLimit) {
      sizeClass = kUpTable[bytes >> 4];  // always a class
    } else {
      sizeClass = roundingUp(bytes);
      if (sizeClass >= kClasses) return nullptr;
    }
    std::uint64_t candidates = nonEmpty_ & (~std::uint64_t{0} << sizeClass);
    if (candidates == 0) return nullptr;
    auto found = static_cast<std::size_t>(std::countr_zero(candidates));
    Link* block = heads_[found];
    heads_[found] = block->next;
    nonEmpty_ &= ~(std::uint64_t{block->next == nullptr} << found);
    return block;
  }

  void put(void* block, std::size_t bytes) {
    std::size_t sizeClass = classRoundingDown(bytes);
    auto* link = static_cast<Link*>(block);
    link->next = heads_[sizeClass];
    heads_[sizeClass] = link;
    nonEmpty_ |= std::uint64_t{1} << sizeClass;
  }

  // The class whose range holds `bytes` (16 <= bytes < kMaxBlockBytes).
  static constexpr std::size_t classRoundingDown(std::size_t bytes) {
    using namespace free_list_classes;
    return bytes < kTableLimit ? kDownTable[bytes >> 4] : roundingDown(bytes);
  }

  // The first class whose blocks are all at least `bytes`; kClasses or more when none.
  static constexpr std::size_t classRoundingUp(std::size_t bytes) {
    using namespace free_list_classes;
    return bytes < kTableLimit ? kUpTable[bytes >> 4] : roundingUp(bytes);
  }

 private:
  struct Link {
    Link* next;
  };

  Link* heads_[kClasses] = {};
  std::uint64_t nonEmpty_ = 0;
};

static_assert(SegregatedFreeLists::classRoundingDown(16) == 0 && SegregatedFreeLists::classRoundingDown(496) == 30 &&
              SegregatedFreeLists::classRoundingDown(512) == 31 && SegregatedFreeLists::classRoundingDown(624) == 31 &&
              SegregatedFreeLists::classRoundingDown(640) == 32 && SegregatedFreeLists::classRoundingDown(1024) == 35 &&
              SegregatedFreeLists::classRoundingDown(SegregatedFreeLists::kMaxBlockBytes - 16) == 63);
static_assert(SegregatedFreeLists::classRoundingUp(496) == 30 && SegregatedFreeLists::classRoundingUp(512) == 31 &&
              SegregatedFreeLists::classRoundingUp(528) == 32 && SegregatedFreeLists::classRoundingUp(640) == 32 &&
              SegregatedFreeLists::classRoundingUp(1008) == 35 && SegregatedFreeLists::classRoundingUp(1024) == 35 &&
              SegregatedFreeLists::classRoundingUp(128 * 1024) == 63 &&
              SegregatedFreeLists::classRoundingUp(128 * 1024 + 16) >= SegregatedFreeLists::kClasses);

}  // namespace heapkit
