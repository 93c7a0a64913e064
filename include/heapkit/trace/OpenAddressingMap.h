// OpenAddressingMap: the one hash table of the trace tools, from a non-zero 64-bit key to a
// value. It maps live addresses to object ids when address-based logs (the recorder's
// spool, mtrace, heaptrack, the text format) become traces, and object ids to live
// objects in the simulator (behind LiveObjects' window). Open addressing with linear
// probing and backward-shift deletion: a lookup is one or two cache lines and a deletion
// leaves no tombstone, several times faster than std::unordered_map on the millions of
// short-lived objects a trace holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace heapkit::trace {

template <class Value>
class OpenAddressingMap {
 public:
  OpenAddressingMap() : slots_(kInitialSlots) {}

  // Key 0 is never stored (a null address is not an object; ids are stored as id + 1).
  void insert(std::uint64_t key, const Value& value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    Slot& slot = slots_[find(key)];
    if (slot.key == 0) ++size_;
    slot = {key, value};
  }

  bool contains(std::uint64_t key) const { return key != 0 && slots_[find(key)].key == key; }

  // Removes the key; false if it was not there.
  bool erase(std::uint64_t key, Value& value) {
    if (key == 0) return false;
    std::size_t i = find(key);
    if (slots_[i].key != key) return false;
    value = slots_[i].value;
    // Backward shift: pull later members of the probe run into the hole.
    std::size_t mask = slots_.size() - 1;
    std::size_t hole = i;
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
      if (slot.key != 0) visit(slot.key, slot.value);
  }

  // Brings the key's home slot into cache ahead of an insert or erase.
  void prefetch(std::uint64_t key) const { __builtin_prefetch(&slots_[hash(key) & (slots_.size() - 1)]); }

 private:
  struct Slot {
    std::uint64_t key = 0;
    Value value{};
  };
  static constexpr std::size_t kInitialSlots = 1024;

  // Addresses share their low bits and ids are consecutive: mix every bit into the low ones.
  static std::uint64_t hash(std::uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return key;
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
    for (const Slot& slot : old)
      if (slot.key != 0) slots_[find(slot.key)] = slot;
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace heapkit::trace
