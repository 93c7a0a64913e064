// The simulator's table of live objects: trace object id -> (address, requested size,
// usable size), with memory that follows the live objects, not the trace's length (a
// 100 M-event trace streams through it).
//
// Ids are dense (the n-th allocation is object n) and most objects die young, so recent
// ids live in a direct-mapped window indexed by id: a free finds its object with one
// load, in memory the allocations just walked through. An object still live when a newer
// id needs its slot moves to an open-addressing table (linear probing, backward-shift
// deletion), where the long-lived few stay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace heapkit::sim {

class LiveObjects {
 public:
  struct Object {
    void* address = nullptr;
    std::uint64_t size = 0;    // requested
    std::uint64_t usable = 0;  // what the allocator set aside
  };

  LiveObjects() : window_(kWindowSlots), slots_(kInitialSlots) {}

  [[gnu::always_inline]] void insert(std::uint64_t id, const Object& object) {
    Slot& slot = window_[id & (kWindowSlots - 1)];
    if (slot.key != 0 && slot.key != id + 1) [[unlikely]] evict(slot);
    if (slot.key == 0) ++size_;
    slot.key = id + 1;
    slot.object = object;
  }

  // Removes the object; false if it is not live (an allocation that failed in this design).
  [[gnu::always_inline]] bool erase(std::uint64_t id, Object& object) {
    Slot& slot = window_[id & (kWindowSlots - 1)];
    if (slot.key == id + 1) [[likely]] {
      object = slot.object;
      slot.key = 0;
      --size_;
      return true;
    }
    return eraseOld(id + 1, object);
  }

  std::size_t size() const { return size_; }

  template <class Visit>
  void forEach(Visit&& visit) const {
    for (const Slot& slot : window_)
      if (slot.key != 0) visit(slot.key - 1, slot.object);
    for (const Slot& slot : slots_)
      if (slot.key != 0) visit(slot.key - 1, slot.object);
  }

 private:
  struct Slot {
    std::uint64_t key = 0;  // id + 1; 0 is empty
    Object object;
  };
  static constexpr std::size_t kWindowSlots = std::size_t{1} << 15;
  static constexpr std::size_t kInitialSlots = 1024;

  static std::size_t hash(std::uint64_t key) {
    key *= 0x9E3779B97F4A7C15ULL;
    return static_cast<std::size_t>(key ^ (key >> 29));
  }
  std::size_t find(std::uint64_t key) const {
    std::size_t mask = slots_.size() - 1;
    std::size_t i = hash(key) & mask;
    while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }

  // A long-lived object leaves the window for the table.
  [[gnu::noinline]] void evict(Slot& slot) {
    if ((old_ + 1) * 4 > slots_.size() * 3) grow();
    slots_[find(slot.key)] = slot;
    ++old_;
    slot.key = 0;
  }

  [[gnu::noinline]] bool eraseOld(std::uint64_t key, Object& object) {
    std::size_t i = find(key);
    if (slots_[i].key != key) return false;
    object = slots_[i].object;
    std::size_t mask = slots_.size() - 1, hole = i;
    for (std::size_t j = (i + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
      std::size_t home = hash(slots_[j].key) & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].key = 0;
    --old_;
    --size_;
    return true;
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& slot : old)
      if (slot.key != 0) slots_[find(slot.key)] = slot;
  }

  std::vector<Slot> window_;
  std::vector<Slot> slots_;
  std::size_t size_ = 0;  // live objects, window and table
  std::size_t old_ = 0;   // of them in the table
};

}  // namespace heapkit::sim
