// StaticHeap: a contiguous heap inside a buffer the caller owns, for systems with no OS
// (or code that must not call it). Its footprint is the high part of the buffer in use.
#pragma once

#include <cstdint>

#include "heapkit/core/ContiguousArena.h"
#include "heapkit/core/Footprint.h"

namespace heapkit {

class CallerBuffer {
 public:
  CallerBuffer(void* buffer, std::size_t bytes) {
    // Align the start; what is left over at either end is simply not used.
    auto start = reinterpret_cast<std::uintptr_t>(buffer);
    auto aligned = alignUp(start, kMinAlignment);
    if (buffer != nullptr && aligned - start <= bytes) {
      base_ = reinterpret_cast<char*>(aligned);
      capacity_ = (bytes - (aligned - start)) & ~(kMinAlignment - 1);
    }
  }

  char* base() const { return base_; }
  std::size_t capacity() const { return capacity_; }
  bool commit(std::size_t end) {
    if (end > footprint_.held()) footprint_.add(end - footprint_.held());
    return true;
  }
  void decommit(std::size_t end) {
    if (end < footprint_.held()) footprint_.remove(footprint_.held() - end);
  }
  std::size_t committedBytes() const { return footprint_.held(); }
  std::size_t peakCommittedBytes() const { return footprint_.peak(); }

 private:
  char* base_ = nullptr;
  std::size_t capacity_ = 0;
  Footprint footprint_;
};

class StaticHeap : public ContiguousArena<CallerBuffer> {
 public:
  StaticHeap(void* buffer, std::size_t bytes) : ContiguousArena<CallerBuffer>(buffer, bytes) {}
};

}  // namespace heapkit
