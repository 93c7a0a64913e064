// espresso-like: two-level logic minimisation over many mid-size sets. A multiple-output
// function of 9-11 inputs is given as minterms (cubes in positional notation, two bits
// per input and one per output, 16-72 bytes each); Quine-McCluskey merging finds its
// prime cubes level by level through hash tables of chained nodes, and single-cube
// containment removes redundant primes. Covers and tables grow by doubling, as espresso's
// set families do. The minimised cover must compute exactly the original function on
// every input, so a heap that corrupts a set is caught.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>

#include "AllocatorPolicy.h"

namespace heapkit::workloads {

namespace espresso_detail {

using Word = std::uint64_t;

// Cubes of one problem: `inputs` two-bit fields (01 = 0, 10 = 1, 11 = either), then
// `outputs` bits, in `words` 64-bit words.
template <AllocatorPolicy A>
class CubeSpace {
 public:
  CubeSpace(A& alloc, unsigned inputs, unsigned outputs)
      : alloc_(alloc), inputs_(inputs), outputs_(outputs), words_((2 * inputs + outputs + 63) / 64) {}

  unsigned inputs() const { return inputs_; }
  unsigned words() const { return words_; }

  Word* make() {
    Word* cube = allocateArray<Word>(alloc_, words_);
    std::memset(cube, 0, words_ * sizeof(Word));
    return cube;
  }
  Word* copy(const Word* cube) {
    Word* twin = allocateArray<Word>(alloc_, words_);
    std::memcpy(twin, cube, words_ * sizeof(Word));
    return twin;
  }
  void release(Word* cube) { alloc_.deallocate(cube); }

  static bool bit(const Word* cube, unsigned index) { return (cube[index / 64] >> (index % 64)) & 1; }
  static void setBit(Word* cube, unsigned index) { cube[index / 64] |= Word{1} << (index % 64); }
  static void flipBit(Word* cube, unsigned index) { cube[index / 64] ^= Word{1} << (index % 64); }

  // The literal of input v: 1 (must be 0), 2 (must be 1) or 3 (either).
  static unsigned literal(const Word* cube, unsigned v) { return bit(cube, 2 * v) | (bit(cube, 2 * v + 1) << 1); }
  unsigned outputBit(unsigned o) const { return 2 * inputs_ + o; }

  bool equal(const Word* a, const Word* b) const { return std::memcmp(a, b, words_ * sizeof(Word)) == 0; }
  bool sameOutputs(const Word* a, const Word* b) const {
    for (unsigned o = 0; o < outputs_; ++o)
      if (bit(a, outputBit(o)) != bit(b, outputBit(o))) return false;
    return true;
  }
  // a is inside b: every input point and output of a is one of b's.
  bool contains(const Word* b, const Word* a) const {
    for (unsigned w = 0; w < words_; ++w)
      if ((a[w] & ~b[w]) != 0) return false;
    return true;
  }
  bool coversPoint(const Word* cube, unsigned point) const {
    for (unsigned v = 0; v < inputs_; ++v)
      if (!bit(cube, 2 * v + ((point >> v) & 1))) return false;
    return true;
  }
  std::uint64_t hash(const Word* cube) const {
    std::uint64_t h = 0;
    for (unsigned w = 0; w < words_; ++w) h = mixChecksum(h, cube[w]);
    return h;
  }

 private:
  A& alloc_;
  unsigned inputs_, outputs_, words_;
};

// A growable array of cubes (a set family).
template <AllocatorPolicy A>
struct Cover {
  A& alloc;
  Word** cubes = nullptr;
  std::size_t count = 0, capacity = 0;

  explicit Cover(A& a) : alloc(a) {}
  void push(Word* cube) {
    if (count == capacity) growArray(alloc, cubes, count, capacity, 8);
    cubes[count++] = cube;
  }
  void releaseAll(CubeSpace<A>& space) {
    for (std::size_t i = 0; i < count; ++i) space.release(cubes[i]);
    alloc.deallocate(cubes);
    cubes = nullptr;
    count = capacity = 0;
  }
};

// A set of distinct cubes, chained, remembering which ones merged with a neighbour.
template <AllocatorPolicy A>
class CubeTable {
 public:
  struct Entry {
    Entry* next;
    Word* cube;
    bool merged;
  };

  CubeTable(A& alloc, CubeSpace<A>& space) : alloc_(alloc), space_(space) { resize(16); }
  ~CubeTable() {
    for (std::size_t b = 0; b < buckets_; ++b) {
      for (Entry* entry = table_[b]; entry != nullptr;) {
        Entry* next = entry->next;
        alloc_.deallocate(entry);
        entry = next;
      }
    }
    alloc_.deallocate(table_);
  }

  Entry* find(const Word* cube) const {
    for (Entry* entry = table_[space_.hash(cube) & (buckets_ - 1)]; entry != nullptr; entry = entry->next)
      if (space_.equal(entry->cube, cube)) return entry;
    return nullptr;
  }
  // Takes the cube unless an equal one is there already (then the caller keeps it).
  bool insert(Word* cube) {
    if (find(cube) != nullptr) return false;
    if (size_ == buckets_) resize(buckets_ * 2);
    auto* entry = static_cast<Entry*>(allocateOrThrow(alloc_, sizeof(Entry)));
    Entry*& head = table_[space_.hash(cube) & (buckets_ - 1)];
    *entry = Entry{head, cube, false};
    head = entry;
    ++size_;
    return true;
  }
  std::size_t size() const { return size_; }
  template <class Visit>
  void forEach(Visit visit) {
    for (std::size_t b = 0; b < buckets_; ++b)
      for (Entry* entry = table_[b]; entry != nullptr; entry = entry->next) visit(*entry);
  }

 private:
  void resize(std::size_t buckets) {
    auto** fresh = allocateArray<Entry*>(alloc_, buckets);
    std::memset(fresh, 0, buckets * sizeof(Entry*));
    for (std::size_t b = 0; b < buckets_; ++b) {
      for (Entry* entry = table_[b]; entry != nullptr;) {
        Entry* next = entry->next;
        Entry*& head = fresh[space_.hash(entry->cube) & (buckets - 1)];
        entry->next = head;
        head = entry;
        entry = next;
      }
    }
    alloc_.deallocate(table_);
    table_ = fresh;
    buckets_ = buckets;
  }

  A& alloc_;
  CubeSpace<A>& space_;
  Entry** table_ = nullptr;
  std::size_t buckets_ = 0, size_ = 0;
};

// Tables live on the heap under test too, like everything else the workload holds.
template <AllocatorPolicy A>
CubeTable<A>* newTable(A& alloc, CubeSpace<A>& space) {
  return new (allocateOrThrow(alloc, sizeof(CubeTable<A>))) CubeTable<A>(alloc, space);
}
template <AllocatorPolicy A>
void deleteTable(A& alloc, CubeTable<A>* table) {
  table->~CubeTable<A>();
  alloc.deallocate(table);
}

template <AllocatorPolicy A>
std::uint64_t minimise(A& alloc, Rng& rng, unsigned inputs, unsigned outputs) {
  CubeSpace<A> space(alloc, inputs, outputs);
  const unsigned points = 1u << inputs;

  // The function: each output is an OR of a few random hidden cubes.
  Cover<A> hidden(alloc);
  for (unsigned h = 0; h < 3 * inputs; ++h) {
    Word* cube = space.make();
    for (unsigned v = 0; v < inputs; ++v) {
      unsigned choice = static_cast<unsigned>(rng.below(4));
      if (choice != 1) space.setBit(cube, 2 * v);      // 0 allowed
      if (choice != 2) space.setBit(cube, 2 * v + 1);  // 1 allowed
    }
    for (unsigned o = 0; o < outputs; ++o)
      if (rng.below(8) == 0) space.setBit(cube, space.outputBit(o));
    hidden.push(cube);
  }
  // Only the output bits, to OR outputs together a word at a time.
  Word* outputMask = space.make();
  for (unsigned o = 0; o < outputs; ++o) space.setBit(outputMask, space.outputBit(o));

  // The truth table, one minterm with its outputs per input point: the reference for
  // the check at the end. The minterms with any output set are the first level.
  auto** truth = allocateArray<Word*>(alloc, points);
  auto* current = newTable(alloc, space);
  for (unsigned point = 0; point < points; ++point) {
    Word* minterm = space.make();
    for (unsigned v = 0; v < inputs; ++v) space.setBit(minterm, 2 * v + ((point >> v) & 1));
    bool any = false;
    for (std::size_t h = 0; h < hidden.count; ++h) {
      if (!space.coversPoint(hidden.cubes[h], point)) continue;
      for (unsigned w = 0; w < space.words(); ++w) minterm[w] |= hidden.cubes[h][w] & outputMask[w];
      any = true;
    }
    truth[point] = space.copy(minterm);
    if (any) current->insert(minterm);
    else space.release(minterm);
  }
  hidden.releaseAll(space);

  // Quine-McCluskey: merge cubes that differ in one input and agree on the outputs;
  // a cube that merged with none is prime.
  Cover<A> primes(alloc);
  while (current->size() != 0) {
    auto* next = newTable(alloc, space);
    current->forEach([&](typename CubeTable<A>::Entry& entry) {
      for (unsigned v = 0; v < inputs; ++v) {
        if (CubeSpace<A>::literal(entry.cube, v) == 3) continue;
        Word* neighbour = space.copy(entry.cube);
        space.flipBit(neighbour, 2 * v);
        space.flipBit(neighbour, 2 * v + 1);
        auto* found = current->find(neighbour);
        space.release(neighbour);
        if (found == nullptr) continue;
        entry.merged = found->merged = true;
        Word* merged = space.copy(entry.cube);
        space.setBit(merged, 2 * v);
        space.setBit(merged, 2 * v + 1);
        if (!next->insert(merged)) space.release(merged);
      }
    });
    current->forEach([&](typename CubeTable<A>::Entry& entry) {
      if (entry.merged) space.release(entry.cube);
      else primes.push(entry.cube);
    });
    deleteTable(alloc, current);
    current = next;
  }
  deleteTable(alloc, current);

  // Single-cube containment: drop a prime that another prime contains.
  Cover<A> kept(alloc);
  for (std::size_t i = 0; i < primes.count; ++i) {
    bool redundant = false;
    for (std::size_t j = 0; j < primes.count && !redundant; ++j)
      redundant = j != i && primes.cubes[j] != nullptr && space.contains(primes.cubes[j], primes.cubes[i]);
    if (redundant) {
      space.release(primes.cubes[i]);
      primes.cubes[i] = nullptr;
    } else {
      kept.push(primes.cubes[i]);
    }
  }
  alloc.deallocate(primes.cubes);

  // The check: on every input point, the cover yields exactly the original outputs.
  std::uint64_t checksum = kept.count;
  Word* outputsAt = space.make();
  for (unsigned point = 0; point < points; ++point) {
    std::memset(outputsAt, 0, space.words() * sizeof(Word));
    for (unsigned v = 0; v < inputs; ++v) space.setBit(outputsAt, 2 * v + ((point >> v) & 1));
    for (std::size_t i = 0; i < kept.count; ++i) {
      if (!space.coversPoint(kept.cubes[i], point)) continue;
      for (unsigned w = 0; w < space.words(); ++w) outputsAt[w] |= kept.cubes[i][w] & outputMask[w];
    }
    require(space.equal(outputsAt, truth[point]), "minimised cover computes a different function");
    space.release(truth[point]);
  }
  space.release(outputsAt);
  space.release(outputMask);
  alloc.deallocate(truth);
  for (std::size_t i = 0; i < kept.count; ++i) checksum = mixChecksum(checksum, space.hash(kept.cubes[i]));
  kept.releaseAll(space);
  return checksum;
}

}  // namespace espresso_detail

// scale: problems to minimise (inputs 9-11, outputs 48-512).
template <AllocatorPolicy A>
std::uint64_t runEspresso(A& alloc, unsigned scale) {
  Rng rng(0xE5B8E550);
  std::uint64_t checksum = 0;
  constexpr unsigned kOutputs[] = {48, 112, 240, 512};
  for (unsigned problem = 0; problem < scale; ++problem)
    checksum = mixChecksum(checksum, espresso_detail::minimise(alloc, rng, 9 + problem % 3, kOutputs[problem % 4]));
  return checksum;
}

}  // namespace heapkit::workloads
