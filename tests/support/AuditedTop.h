// A top heap for tests: a MallocHeap that, when it is destroyed, records how many bytes
// the layers above it had not given back. Every layer's destructor runs before this one,
// so a non-zero figure means some layer kept memory it should have returned.
#pragma once

#include <cstddef>

#include "heapkit/top/MallocHeap.h"

namespace heapkit::testing {

struct TeardownAudit {
  static inline std::size_t leftoverBytes = 0;
  static inline std::size_t teardowns = 0;
};

class AuditedTop : public MallocHeap {
 public:
  ~AuditedTop() {
    TeardownAudit::leftoverBytes += bytesHeld();
    ++TeardownAudit::teardowns;
  }
};

// A parent that fails every request after the first `budget`, to check that a null from
// the parent propagates and nothing is written through it.
class FailingTop : public MallocHeap {
 public:
  void* malloc(std::size_t size) {
    if (budget_ == 0) return nullptr;
    --budget_;
    return MallocHeap::malloc(size);
  }
  void setBudget(std::size_t budget) { budget_ = budget; }

 private:
  std::size_t budget_ = 0;
};

}  // namespace heapkit::testing
