// The one trace-application loop: a trace's operations, in order, as calls of a heap's
// malloc family. The simulator (src/sim/Simulate.cpp) streams a trace through it, a few
// hundred decoded operations at a time; the replayer (src/replay) and the verifier that
// `heapkit build` compiles decode the whole trace first and time the loop alone. All
// make the same calls with the same arguments, so a design simulated and the same design
// replayed for real see the same requests.
//
// The calls, and how their results are read, are glibc's whatever the heap:
//  - malloc, calloc(1, size), posix_memalign(max(alignment, sizeof(void*)), size);
//  - free of an object that is not live here (its allocation failed in this heap) is
//    free(NULL);
//  - realloc(p, size) with p the old object's block (NULL if its allocation failed):
//    a non-null result is the new object; NULL with size 0 and p non-null means p was freed
//    (glibc's realloc(p, 0)), which is no failure, and the new id names no object; any
//    other NULL is a failed allocation, and p stays live under its old id, as C requires.
//    realloc(NULL, 0) is malloc(0).
//
// What the loop asks of the side that keeps the live objects (the ledger):
//   Entry take(id)                        the object leaves; Entry{} (address null) if not live
//   void keep(id, const Entry&)           a taken object stays live (its realloc failed);
//                                         Entry{}: an id that names no object
//   void place(id, void* object, size)    a new object (never null)
//   void failed(id)                       an allocation the heap could not serve (object id)
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "heapkit/trace/Format.h"

namespace heapkit::trace {

template <class L>
concept ObjectLedger = requires(L& ledger, std::uint64_t id, void* object, const typename L::Entry& entry) {
  { ledger.take(id) } -> std::same_as<typename L::Entry>;
  { entry.address } -> std::convertible_to<void*>;
  ledger.keep(id, entry);
  ledger.place(id, object, id);
  ledger.failed(id);
};

template <class H>
concept ReplayableHeap = requires(H& heap, void* object, void** result, std::size_t n) {
  { heap.malloc(n) } -> std::same_as<void*>;
  { heap.calloc(n, n) } -> std::same_as<void*>;
  { heap.realloc(object, n) } -> std::same_as<void*>;
  { heap.posix_memalign(result, n, n) } -> std::same_as<int>;
  heap.free(object);
};

template <ReplayableHeap Heap, ObjectLedger Ledger>
[[gnu::always_inline]] inline void applyOperation(Heap& heap, Ledger& ledger, const Operation& operation) {
  const std::uint64_t id = operation.id();
  const std::uint64_t size = operation.size;
  void* object;
  switch (operation.op()) {
    case Op::Malloc: object = heap.malloc(size); break;
    case Op::Calloc: object = heap.calloc(1, size); break;
    case Op::Aligned: {
      void* aligned = nullptr;
      std::size_t alignment = operation.extra < sizeof(void*) ? sizeof(void*) : operation.extra;
      object = heap.posix_memalign(&aligned, alignment, size) == 0 ? aligned : nullptr;
      break;
    }
    case Op::Realloc: {
      const typename Ledger::Entry old = ledger.take(operation.extra);
      object = heap.realloc(old.address, size);
      if (object == nullptr) [[unlikely]] {
        if (size == 0 && old.address != nullptr) {
          ledger.keep(id, {});  // glibc's realloc(p, 0): p freed, and the new id names no object
          return;
        }
        ledger.keep(operation.extra, old);  // C keeps the old block (none if it failed too)
        ledger.failed(id);
        return;
      }
      break;
    }
    default:  // Free
      heap.free(ledger.take(id).address);
      return;
  }
  if (object == nullptr) [[unlikely]] {
    ledger.failed(id);
    return;
  }
  ledger.place(id, object, size);
}

// Applies [begin, end) in order; `after(operation)` runs after each (the simulator's
// footprint accounting, the replayer's resident-set samples; nothing in a timed replay).
template <ReplayableHeap Heap, ObjectLedger Ledger, class After>
[[gnu::always_inline]] inline void applyOperations(Heap& heap, Ledger& ledger, const Operation* begin, const Operation* end,
                                                   After&& after) {
  for (const Operation* operation = begin; operation != end; ++operation) {
    applyOperation(heap, ledger, *operation);
    after(*operation);
  }
}

template <ReplayableHeap Heap, ObjectLedger Ledger>
inline void applyOperations(Heap& heap, Ledger& ledger, const Operation* begin, const Operation* end) {
  applyOperations(heap, ledger, begin, end, [](const Operation&) {});
}

}  // namespace heapkit::trace
