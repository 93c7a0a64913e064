// What the replayed program does with the memory it gets, told to the cache model
// (heapkit/core/CacheModel.h): the simulator's Data for the trace loop (TraceApplier.h).
// heapkit-replay, which the time model is calibrated against, writes one byte per page of
// every object it gets (src/replay/TimedReplay.h, touch; --no-touch turns it off); the
// design's ANSIWrapper zeroes a calloc's object (what its heap's bytesToClear says may hold
// old data) and copies a moved realloc's bytes, which over simulated memory it skips, so
// they are followed here: every page written, and the
// bytes copied counted (a time model feature: the copy's cost is not the allocator's
// metadata, but it depends on the design, which decides when a realloc moves).
#pragma once

#include <algorithm>
#include <cstdint>

#include "heapkit/core/CacheModel.h"
#include "heapkit/trace/Format.h"

namespace heapkit::sim {

struct ProgramTouchCounts {
  std::uint64_t copiedBytes = 0;  // bytes a moving realloc copied
};

class ProgramTouches {
 public:
  // model null: nothing followed (the simulation was not asked for the cache model).
  // clear(heap, object, bytes): the bytes of a calloc'd object ANSIWrapper clears (the
  // heap's bytesToClear: a fresh span's pages are left alone, as over real memory).
  using ClearFunction = std::uint64_t (*)(void* heap, void* object, std::uint64_t bytes);
  ProgramTouches(CacheModel* model, bool touchObjects, ProgramTouchCounts* counts, void* heap = nullptr,
                 ClearFunction clear = wholeObject)
      : model_(model), touchObjects_(touchObjects), counts_(counts), heap_(heap), clear_(clear) {}
  ProgramTouches() = default;

  [[gnu::always_inline]] void operation(const trace::Operation& operation) {
    kind_ = operation.op();
    size_ = operation.size;
    moving_ = nullptr;
  }
  [[gnu::always_inline]] void freeing(void* object, std::uint64_t usable, std::uint64_t) {
    if (kind_ == trace::Op::Realloc) {
      moving_ = object;
      movingUsable_ = usable;
    }
  }
  [[gnu::always_inline]] void written(void* object, std::uint64_t, std::uint64_t) {
    if (model_ == nullptr) return;
    if (kind_ == trace::Op::Calloc) model_->touchObject(object, clear_(heap_, object, size_));  // ANSIWrapper's memset
    if (moving_ != nullptr && moving_ != object) {                      // ANSIWrapper's memcpy
      std::uint64_t copied = std::min(size_, movingUsable_);
      counts_->copiedBytes += copied;
      model_->touchObject(object, copied);
    }
    if (touchObjects_) model_->touchObject(object, size_);
  }

 private:
  static std::uint64_t wholeObject(void*, void*, std::uint64_t bytes) { return bytes; }

  CacheModel* model_ = nullptr;
  bool touchObjects_ = false;
  ProgramTouchCounts* counts_ = nullptr;
  void* heap_ = nullptr;
  ClearFunction clear_ = wholeObject;
  trace::Op kind_ = trace::Op::Malloc;
  std::uint64_t size_ = 0;
  void* moving_ = nullptr;
  std::uint64_t movingUsable_ = 0;
};

}  // namespace heapkit::sim
