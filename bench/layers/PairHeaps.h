// The heaps of the abstraction-penalty benchmarks, layered and monolithic, by name, and
// the measured loop: one malloc+free pair per iteration, the pointer kept opaque so the
// compiler cannot drop the pair.
#pragma once

#include <cstddef>
#include <string_view>

#include "heapkit/building/ChunkHeap.h"
#include "heapkit/building/FreelistHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/objectrep/SizeHeap.h"
#include "heapkit/top/MmapHeap.h"
#include "layers/MonolithicHeaps.h"

namespace heapkit::bench {

using LayeredFreelistHeap = FreelistHeap<SizeHeap<ChunkHeap<64 * 1024, MmapHeap>>>;
using LayeredKingsleyHeap = KingsleyHeap<MmapHeap>;

// Each comparison: a layered heap and its monolithic twin, a request size, and how the
// pair is reached: "called" through one out-of-line malloc and one free function, as a
// program reaches malloc through the malloc-family wrapper; "inlined" into the loop,
// where the compiler may also hoist work on the loop-invariant size.
struct PairCase {
  std::string_view name;
  std::size_t size;
  bool inlined;
};
inline constexpr PairCase kPairCases[] = {
    {"FreelistHeap", 32, false}, {"KingsleyHeap", 24, false}, {"KingsleyHeap", 200, false},
    {"KingsleyHeap", 3000, false}, {"FreelistHeap", 32, true}, {"KingsleyHeap", 24, true},
};

inline void keepOpaque(void* pointer) { asm volatile("" : : "r"(pointer) : "memory"); }

template <class Heap>
[[gnu::noinline]] void* calledMalloc(Heap& heap, std::size_t size) {
  return heap.malloc(size);
}
template <class Heap>
[[gnu::noinline]] void calledFree(Heap& heap, void* object) {
  heap.free(object);
}

template <class Heap>
[[gnu::noinline]] void mallocFreePairs(Heap& heap, std::size_t size, std::size_t pairs, bool inlined) {
  if (inlined) {
    for (std::size_t i = 0; i < pairs; ++i) {
      void* object = heap.malloc(size);
      keepOpaque(object);
      heap.free(object);
    }
  } else {
    for (std::size_t i = 0; i < pairs; ++i) {
      void* object = calledMalloc(heap, size);
      keepOpaque(object);
      calledFree(heap, object);
    }
  }
}

// Calls run(heap) with a fresh heap of the case's kind, layered or monolithic.
template <class Run>
void withPairHeap(std::string_view name, bool layered, Run run) {
  if (name == "FreelistHeap") {
    if (layered) {
      LayeredFreelistHeap heap;
      run(heap);
    } else {
      MonolithicFreelistHeap heap;
      run(heap);
    }
  } else {
    if (layered) {
      LayeredKingsleyHeap heap;
      run(heap);
    } else {
      MonolithicKingsleyHeap heap;
      run(heap);
    }
  }
}

}  // namespace heapkit::bench
