// MallocHeap: a top heap over the C library's malloc. Useful as a baseline and on
// platforms where heapkit must sit on top of an existing allocator.
#pragma once

#include <cstdlib>

#include "heapkit/core/TrackedOsHeap.h"

namespace heapkit {

struct LibcMallocSource {
  static void* obtain(std::size_t& bytes) { return std::malloc(bytes); }
  static void release(void* block, std::size_t) { std::free(block); }
};

class MallocHeap : public TrackedOsHeap<LibcMallocSource> {};

}  // namespace heapkit
