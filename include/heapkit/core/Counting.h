// Counting work and metadata accesses is a policy of the platform: a top heap that counts
// has workCounts(), and every layer above it (each derives from it) reports through the
// functions here. Over a top heap that does not count, they compile to nothing, so a
// shipped allocator pays no instruction for them. docs/simulator.md defines each count.
//
// Accesses are counted where they happen: a layer reads and writes its metadata (headers,
// tags, links, list heads, bins) through loadMetadata and storeMetadata, which are plain
// loads and stores over real memory and, over a counting top heap, also tell the counts
// which word was touched. A count typed as a constant beside the code drifts from it
// unseen, since the simulated and the built heap would share the constant.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>

#include "heapkit/core/CacheModel.h"

namespace heapkit {

struct WorkCounts {
  std::uint64_t steps = 0;      // algorithmic steps: list or tree nodes visited, size-class lookups,
                                // bins probed, blocks split or merged, requests to the OS
  std::uint64_t reads = 0;      // words of allocator metadata read (headers, tags, links, bins)
  std::uint64_t writes = 0;     // words of allocator metadata written
  std::uint64_t splits = 0;     // blocks cut in two
  std::uint64_t coalesces = 0;  // pairs of free neighbours merged

  // Where the accesses also go, when the simulator follows them (core/CacheModel.h):
  // null unless asked for, so counting alone costs one test per access.
  CacheModel* cacheModel = nullptr;

  // One metadata word read or written at `address`.
  [[gnu::always_inline]] void read(const void* address) {
    ++reads;
    if (cacheModel != nullptr) cacheModel->access(address);
  }
  [[gnu::always_inline]] void write(const void* address) {
    ++writes;
    if (cacheModel != nullptr) cacheModel->access(address);
  }
  // Pages the top heap gave back to the OS: the next access to them is a fault again.
  void pagesReleased(const void* start, std::size_t bytes) {
    if (cacheModel != nullptr) cacheModel->pagesReleased(start, bytes);
  }
};

template <class H>
concept CountingHeap = requires(H& heap) {
  { heap.workCounts() } -> std::same_as<WorkCounts&>;
};

// The heap to pass where code touches metadata outside any heap's work (a test's walk,
// a const query): its loads and stores are plain and counted nowhere.
struct Uncounted {};

// A metadata word, loaded through the heap's memory policy.
template <class H, class T>
[[gnu::always_inline]] inline T loadMetadata(H& heap, const T& word) {
  if constexpr (CountingHeap<H>) heap.workCounts().read(&word);
  return word;
}

// A metadata word, stored through the heap's memory policy.
template <class H, class T, class V>
[[gnu::always_inline]] inline void storeMetadata(H& heap, T& word, V&& value) {
  if constexpr (CountingHeap<H>) heap.workCounts().write(&word);
  word = static_cast<V&&>(value);
}

// A metadata word that other threads may read or write at the same time (a superblock's
// free token and flags): loaded and stored relaxed, counted like any other.
template <class H, class T>
[[gnu::always_inline]] inline T loadMetadata(H& heap, const std::atomic<T>& word) {
  if constexpr (CountingHeap<H>) heap.workCounts().read(&word);
  return word.load(std::memory_order_relaxed);
}
template <class H, class T, class V>
[[gnu::always_inline]] inline void storeMetadata(H& heap, std::atomic<T>& word, V&& value) {
  if constexpr (CountingHeap<H>) heap.workCounts().write(&word);
  word.store(static_cast<V&&>(value), std::memory_order_relaxed);
}

// One algorithmic step: a loop iteration (a list node visited, a bin probed), a lookup.
template <class H>
[[gnu::always_inline]] inline void countStep(H& heap, std::uint64_t steps = 1) {
  if constexpr (CountingHeap<H>) heap.workCounts().steps += steps;
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
