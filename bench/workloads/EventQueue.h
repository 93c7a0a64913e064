// The pending events of the discrete-event workloads (lindsay, boxedsim): a binary heap of
// pointers to separately allocated event records, earliest first, ties broken by creation
// order so runs are deterministic. Its array grows by doubling through the workload's
// allocator, as the event lists of the original programs do.
#pragma once

#include <cstddef>

#include "AllocatorPolicy.h"

namespace heapkit::workloads {

// Event: any record with comparable `time` and `sequence` members.
template <AllocatorPolicy A, class Event>
class EventQueue {
 public:
  explicit EventQueue(A& alloc) : alloc_(alloc) {}
  ~EventQueue() { alloc_.deallocate(heap_); }
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  bool empty() const { return size_ == 0; }
  const Event* top() const { return heap_[0]; }
  void push(Event* event) {
    if (size_ == capacity_) growArray(alloc_, heap_, size_, capacity_, 64);
    std::size_t i = size_++;
    while (i > 0 && before(event, heap_[(i - 1) / 2])) {
      heap_[i] = heap_[(i - 1) / 2];
      i = (i - 1) / 2;
    }
    heap_[i] = event;
  }
  Event* pop() {
    Event* top = heap_[0];
    Event* last = heap_[--size_];
    std::size_t i = 0;
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= size_) break;
      if (child + 1 < size_ && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], last)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
    return top;
  }

 private:
  static bool before(const Event* a, const Event* b) {
    return a->time != b->time ? a->time < b->time : a->sequence < b->sequence;
  }

  A& alloc_;
  Event** heap_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace heapkit::workloads
