// LiveObjects: a trace's live objects by id (object id -> what the replaying side keeps of
// it), in memory that follows the live objects, not the trace's length (a 100 M-event
// trace streams through it).
//
// Ids are dense (the n-th allocation is object n) and most objects die young, so recent
// ids live in a direct-mapped window indexed by id: a free finds its object with one
// load, in memory the allocations just walked through. An object still live when a newer
// id needs its slot moves to the OpenAddressingMap, where the long-lived few stay.
//
// The window holds 2^17 objects (4 MiB with the simulator's 24-byte objects): on the
// bench traces a smaller one sends more objects through the table (gcbench's trees; with
// 2^15, the loop alone takes 1.8x as long there), a larger one gains nothing. It is
// calloc'ed, so its pages cost nothing until ids reach them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

#include "heapkit/trace/OpenAddressingMap.h"

namespace heapkit::trace {

template <class Object>
class LiveObjects {
  static_assert(std::is_trivially_copyable_v<Object>, "window slots are zeroed memory");

 public:
  LiveObjects() : window_(static_cast<Slot*>(std::calloc(kWindowSlots, sizeof(Slot)))) {
    if (window_ == nullptr) throw std::bad_alloc();
  }

  [[gnu::always_inline]] void insert(std::uint64_t id, const Object& object) {
    Slot& slot = window_[id & (kWindowSlots - 1)];
    if (slot.key != 0) [[unlikely]] evict(slot);
    slot.key = id + 1;
    slot.object = object;
  }

  struct Taken {
    Object object;
    bool live;  // false: the id was not in the table
  };

  // The object, no longer live.
  [[gnu::always_inline]] Taken take(std::uint64_t id) {
    Slot& slot = window_[id & (kWindowSlots - 1)];
    if (slot.key == id + 1) [[likely]] {
      slot.key = 0;
      return {slot.object, true};
    }
    return takeOld(id + 1);
  }

  // Counts them: a walk over the window, for tests and reports, not for every event.
  std::size_t size() const {
    std::size_t n = old_.size();
    for (std::size_t i = 0; i < kWindowSlots; ++i) n += window_[i].key != 0;
    return n;
  }

  template <class Visit>
  void forEach(Visit&& visit) const {
    for (std::size_t i = 0; i < kWindowSlots; ++i)
      if (window_[i].key != 0) visit(window_[i].key - 1, window_[i].object);
    old_.forEach([&](std::uint64_t key, const Object& object) { visit(key - 1, object); });
  }

 private:
  struct Slot {
    std::uint64_t key = 0;  // id + 1; 0 is empty
    Object object{};
  };
  static constexpr std::size_t kWindowSlots = std::size_t{1} << 17;

  // A long-lived object leaves the window for the table. (Ids only grow, so a slot's
  // occupant is never the id that wants it.)
  [[gnu::noinline]] void evict(Slot& slot) { old_.insert(slot.key, slot.object); }

  [[gnu::noinline]] Taken takeOld(std::uint64_t key) {
    Taken taken{};
    taken.live = old_.size() != 0 && old_.erase(key, taken.object);
    return taken;
  }

  struct Free {
    void operator()(Slot* slots) const { std::free(slots); }
  };
  std::unique_ptr<Slot[], Free> window_;
  OpenAddressingMap<Object> old_;
};

}  // namespace heapkit::trace
