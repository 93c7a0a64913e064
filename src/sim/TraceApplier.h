// The simulator's side of the trace loop (heapkit/trace/TraceLoop.h): which objects are
// live, what they requested and what the allocator set aside for them, and the trace's
// operation counts. The simulator applies a trace to a design over simulated memory with
// it; the fidelity tests apply the same trace to the same design over real memory with
// it; heapkit-replay makes the same heap calls through the same loop.
//
// Data is what the application would do with its objects: nothing in the simulator; the
// tests fill every usable byte and check it on free (a design that let its metadata into
// an object, or handed a block out twice, shows there).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "heapkit/trace/Format.h"
#include "heapkit/trace/LiveObjects.h"
#include "heapkit/trace/TraceLoop.h"

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
  struct Entry {
    void* address = nullptr;
    std::uint64_t size = 0;    // requested
    std::uint64_t usable = 0;  // what the allocator set aside
  };

  explicit TraceApplier(Heap& heap, Data data = {}) : heap_(heap), data_(data) {}

  [[gnu::always_inline]] void apply(const trace::Operation& operation) {
    ++byOp_[operation.idOp & 0xff];
    // A Data that follows what the program does with its memory needs to know the call.
    if constexpr (requires { data_.operation(operation); }) data_.operation(operation);
    trace::applyOperation(heap_, *this, operation);
  }
  void apply(const trace::Event& e) { apply(trace::Operation::of(e)); }

  TraceCounts counts() const {
    TraceCounts counts;
    using trace::Op;
    counts.mallocs = byOp_[unsigned(Op::Malloc)] + byOp_[unsigned(Op::Calloc)];
    counts.frees = byOp_[unsigned(Op::Free)];
    counts.reallocs = byOp_[unsigned(Op::Realloc)];
    counts.alignedAllocations = byOp_[unsigned(Op::Aligned)];
    counts.events = counts.mallocs + counts.frees + counts.reallocs + counts.alignedAllocations;
    counts.failedRequests = failed_;
    counts.maxLiveBytes = maxLiveBytes_;
    return counts;
  }
  std::uint64_t liveBytes() const { return liveBytes_; }
  std::uint64_t liveUsableBytes() const { return liveUsable_; }

  // Frees whatever the trace left live (tests tear the heap down to zero).
  void freeAll() {
    live_.forEach([this](std::uint64_t id, const Entry& object) {
      data_.freeing(object.address, object.usable, id);
      heap_.free(object.address);
    });
    live_ = trace::LiveObjects<Entry>();
    liveBytes_ = liveUsable_ = 0;
  }

  // The ledger the loop keeps (trace/TraceLoop.h).
  // (An allocation that failed here is Entry{}: subtracting its zeros costs no branch.)
  [[gnu::always_inline]] Entry take(std::uint64_t id) {
    auto [object, live] = live_.take(id);
    if (!live) [[unlikely]] ++untracked_;
    if constexpr (!std::is_same_v<Data, NoData>)
      if (object.address != nullptr) data_.freeing(object.address, object.usable, id);
    liveBytes_ -= object.size;
    liveUsable_ -= object.usable;
    return object;
  }
  void keep(std::uint64_t id, const Entry& object) { insert(id, object); }
  [[gnu::always_inline]] void place(std::uint64_t id, void* object, std::uint64_t size) {
    std::uint64_t usable = heap_.getSize(object);
    data_.written(object, usable, id);
    insert(id, {object, size, usable});
    maxLiveBytes_ = std::max(maxLiveBytes_, liveBytes_);
  }
  // A failed allocation stays in the table as Entry{}, so that a free of an id the table
  // does not hold is the trace's mistake (untracked()).
  void failed(std::uint64_t id) {
    ++failed_;
    live_.insert(id, {});
  }

  // Frees and reallocs of objects that were not live: none in a valid trace. The
  // simulator decodes without the decoder's liveness bits, which would duplicate this
  // table, and asks a checking decoder where the trace went wrong when this is not 0.
  std::uint64_t untracked() const { return untracked_; }

 private:
  [[gnu::always_inline]] void insert(std::uint64_t id, const Entry& object) {
    live_.insert(id, object);
    liveBytes_ += object.size;
    liveUsable_ += object.usable;
  }

  Heap& heap_;
  [[no_unique_address]] Data data_;
  trace::LiveObjects<Entry> live_;
  std::uint64_t byOp_[8] = {};
  std::uint64_t failed_ = 0;
  std::uint64_t untracked_ = 0;
  std::uint64_t maxLiveBytes_ = 0;
  std::uint64_t liveBytes_ = 0;
  std::uint64_t liveUsable_ = 0;
};

}  // namespace heapkit::sim
