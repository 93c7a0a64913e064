// AddressMap: live address -> object id, for turning address-based logs (the recorder's
// spool, mtrace, heaptrack, the text format) into dense ids. Open addressing with linear
// probing and backward-shift deletion: a lookup is one or two cache lines, several times
// faster than std::unordered_map on the millions of short-lived objects a trace holds.
#pragma once

#include <cstdint>
#include <vector>

namespace heapkit::trace {

class AddressMap {
 public:
  AddressMap() : slots_(kInitialSlots) {}

  // Address 0 is never live (a null result is not an object).
  void insert(std::uint64_t address, std::uint64_t id) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    std::size_t i = find(address);
    if (slots_[i].key == 0) ++size_;
    slots_[i] = {address, id};
  }

  bool contains(std::uint64_t address) const { return address != 0 && slots_[find(address)].key == address; }

  // Removes the address; returns false if it was not live.
  bool erase(std::uint64_t address, std::uint64_t& id) {
    if (address == 0) return false;
    std::size_t i = find(address);
    if (slots_[i].key != address) return false;
    id = slots_[i].value;
    // Backward shift: pull later members of the probe run into the hole, so no tombstones.
    std::size_t mask = slots_.size() - 1;
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
      std::size_t home = hash(slots_[j].key) & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = {0, 0};
    --size_;
    return true;
  }

  std::size_t size() const { return size_; }

  // Brings the address's home slot into cache ahead of an insert or erase.
  void prefetch(std::uint64_t address) const { __builtin_prefetch(&slots_[hash(address) & (slots_.size() - 1)]); }

 private:
  struct Slot {
    std::uint64_t key;
    std::uint64_t value;
  };
  static constexpr std::size_t kInitialSlots = 1024;

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
    for (const Slot& s : old)
      if (s.key != 0) slots_[find(s.key)] = s;
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace heapkit::trace
