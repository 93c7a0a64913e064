// The simulator's table of live objects: trace object id -> (address, requested size), in
// open addressing with backward-shift deletion, so its memory follows the live objects,
// not the trace's length (a 100 M-event trace streams through it).
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

  LiveObjects() : slots_(kInitialSlots) {}

  void insert(std::uint64_t id, Object object) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    std::size_t i = find(id + 1);
    if (slots_[i].key == 0) ++size_;
    slots_[i] = {id + 1, object};
  }

  // Removes the object; false if it is not live (a trace that frees an object twice).
  bool erase(std::uint64_t id, Object& object) {
    std::uint64_t key = id + 1;
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
    --size_;
    return true;
  }

  std::size_t size() const { return size_; }

  template <class Visit>
  void forEach(Visit&& visit) const {
    for (const Slot& slot : slots_)
      if (slot.key != 0) visit(slot.key - 1, slot.object);
  }

 private:
  struct Slot {
    std::uint64_t key = 0;  // id + 1; 0 is empty
    Object object;
  };
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
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& slot : old)
      if (slot.key != 0) insert(slot.key - 1, slot.object);
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace heapkit::sim
