// TraceHeap: writes one line per malloc and free, in the text profiling format of the
// DMM papers: "<event#> new <address> <size>" and "<event#> delete <address>".
// The trace goes to stderr unless traceTo() names another stream (or nullptr: none).
#pragma once

#include <cstdio>

#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <Heap Super>
class TraceHeap : public Super {
 public:
  using Super::Super;
  TraceHeap() = default;

  void traceTo(std::FILE* sink) { sink_ = sink; }

  void* malloc(std::size_t size) {
    void* object = Super::malloc(size);
    if (sink_ != nullptr) std::fprintf(sink_, "%zu new %p %zu\n", events_++, object, size);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    if (sink_ != nullptr) std::fprintf(sink_, "%zu delete %p\n", events_++, object);
    Super::free(object);
  }

 private:
  std::FILE* sink_ = stderr;
  std::size_t events_ = 0;
};

}  // namespace heapkit
