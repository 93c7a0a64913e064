// Counting work and metadata accesses is a policy of the platform: a top heap that counts
// has workCounts(), and every layer above it (each derives from it) reports through the
// functions here. Over a top heap that does not count, they compile to nothing, so a
// shipped allocator pays no instruction for them. docs/simulator.md defines each count.
#pragma once

#include <concepts>
#include <cstdint>

namespace heapkit {

struct WorkCounts {
  std::uint64_t steps = 0;      // algorithmic steps: list or tree nodes visited, size-class lookups,
                                // bins probed, blocks split or merged, requests to the OS
  std::uint64_t reads = 0;      // words of allocator metadata read (headers, tags, links, bins)
  std::uint64_t writes = 0;     // words of allocator metadata written
  std::uint64_t splits = 0;     // blocks cut in two
  std::uint64_t coalesces = 0;  // pairs of free neighbours merged
};

template <class H>
concept CountingHeap = requires(H& heap) {
  { heap.workCounts() } -> std::same_as<WorkCounts&>;
};

template <class H>
inline void countWork(H& heap, std::uint64_t steps, std::uint64_t reads = 0, std::uint64_t writes = 0) {
  if constexpr (CountingHeap<H>) {
    WorkCounts& counts = heap.workCounts();
    counts.steps += steps;
    counts.reads += reads;
    counts.writes += writes;
  }
}

template <class H>
inline void countSplit(H& heap) {
  if constexpr (CountingHeap<H>) {
    ++heap.workCounts().splits;
    ++heap.workCounts().steps;
  }
}

template <class H>
inline void countCoalesce(H& heap) {
  if constexpr (CountingHeap<H>) {
    ++heap.workCounts().coalesces;
    ++heap.workCounts().steps;
  }
}

}  // namespace heapkit
