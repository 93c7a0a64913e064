// Allocator policies for the workloads. A workload is a template over any type with
//   void* allocate(std::size_t);  void deallocate(void*);
// so the same code runs on plain ::malloc/::free (and therefore on whatever malloc is
// preloaded) and on any heapkit composition, and the two are timed on identical work.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

namespace heapkit::workloads {

template <class A>
concept AllocatorPolicy = requires(A& alloc, void* ptr, std::size_t size) {
  { alloc.allocate(size) } -> std::same_as<void*>;
  alloc.deallocate(ptr);
};

// The C library's malloc family only, so that LD_PRELOAD can swap the allocator.
struct MallocPolicy {
  void* allocate(std::size_t size) { return std::malloc(size); }
  void deallocate(void* object) { std::free(object); }
};

// Any heapkit heap (the heap is owned elsewhere, so its footprint can be read afterwards).
template <class Heap>
struct HeapPolicy {
  Heap* heap;
  void* allocate(std::size_t size) { return heap->malloc(size); }
  void deallocate(void* object) { heap->free(object); }
};

// A workload found a wrong result: the allocator handed out memory it should not have.
struct WorkloadFailure : std::exception {
  const char* what_;
  explicit WorkloadFailure(const char* what) : what_(what) {}
  const char* what() const noexcept override { return what_; }
};

inline void require(bool condition, const char* what) {
  if (!condition) throw WorkloadFailure(what);
}

// Workloads treat a null as an out-of-memory error, never as memory.
template <AllocatorPolicy A>
void* allocateOrThrow(A& alloc, std::size_t size) {
  void* object = alloc.allocate(size);
  if (object == nullptr) throw std::bad_alloc();
  return object;
}

template <class T, AllocatorPolicy A>
T* allocateArray(A& alloc, std::size_t count) {
  return static_cast<T*>(allocateOrThrow(alloc, count * sizeof(T)));
}

// Doubles a growable array (to firstCapacity when it has none yet) as std::vector does:
// a new array, the items copied, the old array freed.
template <class T, AllocatorPolicy A>
void growArray(A& alloc, T*& items, std::size_t size, std::size_t& capacity, std::size_t firstCapacity) {
  std::size_t grown = capacity == 0 ? firstCapacity : capacity * 2;
  T* bigger = allocateArray<T>(alloc, grown);
  if (size != 0) std::memcpy(bigger, items, size * sizeof(T));
  alloc.deallocate(items);
  items = bigger;
  capacity = grown;
}

// A small deterministic generator (splitmix64), so every allocator sees the same requests.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t bound) { return next() % bound; }

 private:
  std::uint64_t state_;
};

inline std::uint64_t mixChecksum(std::uint64_t checksum, std::uint64_t value) {
  return (checksum ^ value) * 0x100000001B3ULL + 0x9E37;
}

}  // namespace heapkit::workloads
