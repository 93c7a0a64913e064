// MmapHeap: a top heap that maps fresh pages for every request and unmaps them on free.
// The footprint is counted in whole pages, as the kernel charges them. purge gives pages
// of a mapping back (MADV_DONTNEED: they read as zero when next touched) and keeps the
// mapping.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include "heapkit/core/PageSize.h"
#include "heapkit/core/TrackedOsHeap.h"

namespace heapkit {

struct MmapSource {
  static void* obtain(std::size_t& bytes) {
    if (bytes > SIZE_MAX - pageSize()) return nullptr;
    bytes = alignUp(bytes, pageSize());
    void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return block == MAP_FAILED ? nullptr : block;
  }
  static void release(void* block, std::size_t bytes) { munmap(block, bytes); }
  static void purge(void* pages, std::size_t bytes) { madvise(pages, bytes, MADV_DONTNEED); }
};

class MmapHeap : public TrackedOsHeap<MmapSource> {};

}  // namespace heapkit
