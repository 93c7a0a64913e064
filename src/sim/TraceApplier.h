// One trace operation applied to a heap: the calls the simulator makes of a design over
// simulated memory, and the fidelity tests make of the same design over real memory, so
// both see the same requests in the same order. heapkit-replay makes the same calls with
// the same arguments (src/replay/Replay.cpp).
//
// Data is what the application would do with its objects: nothing in the simulator; the
// tests fill every usable byte and check it on free (a design that let its metadata into
// an object, or handed a block out twice, shows there).
#pragma once

#include <algorithm>
#include <cstdint>

#include "LiveObjects.h"
#include "heapkit/trace/Format.h"

namespace heapkit::sim {

struct NoData {
  void written(void*, std::uint64_t, std::uint64_t) {}
  void freeing(void*, std::uint64_t, std::uint64_t) {}
};

struct TraceCounts {
  std::uint64_t events = 0;
  std::uint64_t mallocs = 0;  // malloc and calloc
  std::uint64_t frees = 0;
  std::uint64_t reallocs = 0;
  std::uint64_t alignedAllocations = 0;
  std::uint64_t failedRequests = 0;
  std::uint64_t maxLiveBytes = 0;
};

template <class Heap, class Data = NoData>
class TraceApplier {
 public:
  explicit TraceApplier(Heap& heap, Data data = {}) : heap_(heap), data_(data) {}

  // Returns false when an allocation failed (the design could not serve it).
  bool apply(const trace::Event& e) {
    using trace::Op;
    ++counts_.events;
    switch (e.op) {
      case Op::Malloc: ++counts_.mallocs; return place(e.id, heap_.malloc(e.size), e.size);
      case Op::Calloc: ++counts_.mallocs; return place(e.id, heap_.calloc(1, e.size), e.size);
      case Op::Realloc: {
        ++counts_.reallocs;
        LiveObjects::Object old = take(e.oldId);
        void* moved = heap_.realloc(old.address, e.size);
        if (moved == nullptr && e.size != 0 && old.address != nullptr) {
          // The old block stays valid, as C requires; the trace's new object is missing here.
          keep(e.oldId, old);
        }
        if (e.size == 0) return true;
        return place(e.id, moved, e.size);
      }
      case Op::Aligned: {
        ++counts_.alignedAllocations;
        void* object = nullptr;
        std::size_t alignment = e.alignment < sizeof(void*) ? sizeof(void*) : e.alignment;
        if (heap_.posix_memalign(&object, alignment, e.size) != 0) object = nullptr;
        return place(e.id, object, e.size);
      }
      default:  // Free
        ++counts_.frees;
        heap_.free(take(e.id).address);
        return true;
    }
  }

  const TraceCounts& counts() const { return counts_; }
  std::uint64_t liveBytes() const { return liveBytes_; }
  std::uint64_t liveUsableBytes() const { return liveUsable_; }
  std::size_t liveObjects() const { return live_.size(); }

  // Frees whatever the trace left live (tests tear the heap down to zero).
  void freeAll() {
    live_.forEach([this](std::uint64_t id, const LiveObjects::Object& object) {
      data_.freeing(object.address, object.usable, id);
      heap_.free(object.address);
    });
    live_ = LiveObjects();
    liveBytes_ = liveUsable_ = 0;
  }

 private:
  bool place(std::uint64_t id, void* object, std::uint64_t size) {
    if (object == nullptr) {
      ++counts_.failedRequests;
      return false;
    }
    std::uint64_t usable = heap_.getSize(object);
    data_.written(object, usable, id);
    keep(id, {object, size, usable});
    counts_.maxLiveBytes = std::max(counts_.maxLiveBytes, liveBytes_);
    return true;
  }

  void keep(std::uint64_t id, const LiveObjects::Object& object) {
    live_.insert(id, object);
    liveBytes_ += object.size;
    liveUsable_ += object.usable;
  }

  // The object, no longer live; an empty one for an allocation that failed in this design.
  LiveObjects::Object take(std::uint64_t id) {
    LiveObjects::Object object;
    if (!live_.erase(id, object)) return {};
    data_.freeing(object.address, object.usable, id);
    liveBytes_ -= object.size;
    liveUsable_ -= object.usable;
    return object;
  }

  Heap& heap_;
  [[no_unique_address]] Data data_;
  LiveObjects live_;
  TraceCounts counts_;
  std::uint64_t liveBytes_ = 0;
  std::uint64_t liveUsable_ = 0;
};

}  // namespace heapkit::sim
