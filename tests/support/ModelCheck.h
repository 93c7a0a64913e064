// The randomized model check every allocator in heapkit goes through. A model of the
// live objects (address, size, contents) is kept beside the heap under test; random
// malloc / free / realloc sequences from fixed seeds check that live objects never
// overlap, alignment holds, contents survive until free and getSize covers the request
// (objects of sized heaps are filled to their usable size, not only to the request).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "heapkit/core/HeapContract.h"

namespace heapkit::testing {

struct SizeDistribution {
  std::string name;
  std::function<std::size_t(std::mt19937_64&)> draw;
};

inline std::vector<SizeDistribution> standardDistributions() {
  return {
      {"tiny", [](std::mt19937_64& rng) { return std::uniform_int_distribution<std::size_t>(0, 64)(rng); }},
      {"small", [](std::mt19937_64& rng) { return std::uniform_int_distribution<std::size_t>(1, 1024)(rng); }},
      {"geometric",  // mostly small, a long tail to 256 KiB, as real programs are
       [](std::mt19937_64& rng) {
         std::size_t bits = std::uniform_int_distribution<std::size_t>(3, 18)(rng);
         return std::uniform_int_distribution<std::size_t>(1, std::size_t{1} << bits)(rng) / (1 + rng() % 4);
       }},
      {"fixed48", [](std::mt19937_64&) { return std::size_t{48}; }},
      {"large", [](std::mt19937_64& rng) { return std::uniform_int_distribution<std::size_t>(4096, 600 * 1024)(rng); }},
  };
}

struct ModelCheckOptions {
  std::size_t operations = 20000;
  std::size_t maxLiveObjects = 2000;
  bool exerciseRealloc = true;
  bool mallocMayFail = false;  // a bounded heap (StaticHeap) may say no
};

template <Heap H>
class ModelChecker {
 public:
  ModelChecker(H& heap, std::uint64_t seed) : heap_(heap), rng_(seed) {}

  void run(const SizeDistribution& sizes, const ModelCheckOptions& options) {
    for (std::size_t step = 0; step < options.operations && !::testing::Test::HasFatalFailure(); ++step) {
      unsigned choice = static_cast<unsigned>(rng_() % 100);
      bool mustFree = live_.size() >= options.maxLiveObjects;
      if (!live_.empty() && (mustFree || choice < 40)) {
        freeObject(pickLive());
      } else if (!live_.empty() && options.exerciseRealloc && choice < 50) {
        reallocObject(pickLive(), sizes.draw(rng_), options);
      } else {
        allocate(sizes.draw(rng_), options);
      }
    }
    freeAll();
  }

  void freeAll() {
    while (!live_.empty() && !::testing::Test::HasFatalFailure()) freeObject(live_.begin()->first);
  }

  std::size_t liveObjects() const { return live_.size(); }

 private:
  struct Object {
    std::size_t size;
    std::uint64_t id;
  };

  // Each object's contents: 64-bit words derived from its id, so a block handed to two
  // objects, or overwritten by a layer's metadata, shows up as a mismatch.
  static std::uint64_t wordOf(std::uint64_t id, std::size_t index) {
    return (id * 0x9E3779B97F4A7C15ULL) ^ (index * 0xBF58476D1CE4E5B9ULL);
  }
  static void fill(void* object, std::size_t size, std::uint64_t id) {
    auto* bytes = static_cast<unsigned char*>(object);
    for (std::size_t offset = 0; offset < size; offset += 8) {
      std::uint64_t word = wordOf(id, offset / 8);
      std::memcpy(bytes + offset, &word, std::min<std::size_t>(8, size - offset));
    }
  }
  // The first byte that differs from what fill() wrote, or size when all match.
  static std::size_t firstMismatch(const void* object, std::size_t size, std::uint64_t id) {
    auto* bytes = static_cast<const unsigned char*>(object);
    for (std::size_t offset = 0; offset < size; offset += 8) {
      std::uint64_t word = wordOf(id, offset / 8);
      if (std::memcmp(bytes + offset, &word, std::min<std::size_t>(8, size - offset)) != 0) return offset;
    }
    return size;
  }

  std::uintptr_t pickLive() {
    auto it = live_.lower_bound(static_cast<std::uintptr_t>(rng_()));
    return it == live_.end() ? live_.begin()->first : it->first;
  }

  void allocate(std::size_t size, const ModelCheckOptions& options) {
    void* object = heap_.malloc(size);
    if (object == nullptr) {
      ASSERT_TRUE(options.mallocMayFail) << "malloc(" << size << ") failed";
      return;
    }
    track(object, size, nextId_++);
  }

  void track(void* object, std::size_t size, std::uint64_t id) {
    auto address = reinterpret_cast<std::uintptr_t>(object);
    ASSERT_EQ(address % H::Alignment, 0u) << "misaligned object of " << size << " bytes";
    if constexpr (SizedHeap<H>) {
      ASSERT_GE(heap_.getSize(object), size) << "getSize below the request";
      // Every usable byte belongs to the program (malloc_usable_size promises them): use
      // them all, so metadata kept in them, or a neighbour placed over them, shows up.
      size = heap_.getSize(object);
    }
    std::size_t extent = size == 0 ? 1 : size;
    auto after = live_.lower_bound(address);
    if (after != live_.end()) {
      ASSERT_GE(after->first, address + extent) << "object overlaps the next live object";
      ASSERT_NE(after->first, address) << "the same address is live twice";
    }
    if (after != live_.begin()) {
      auto before = std::prev(after);
      ASSERT_LE(before->first + std::max<std::size_t>(before->second.size, 1), address)
          << "object overlaps the previous live object";
    }
    fill(object, size, id);
    live_[address] = {size, id};
  }

  void verify(std::uintptr_t address, const Object& object) {
    std::size_t mismatch = firstMismatch(reinterpret_cast<void*>(address), object.size, object.id);
    ASSERT_EQ(mismatch, object.size) << "contents of a live object of " << object.size << " bytes changed";
  }

  void freeObject(std::uintptr_t address) {
    Object object = live_.at(address);
    verify(address, object);
    live_.erase(address);
    heap_.free(reinterpret_cast<void*>(address));
  }

  // The heap's own realloc where it has one, else what a malloc wrapper would do.
  void reallocObject(std::uintptr_t address, std::size_t newSize, const ModelCheckOptions& options) {
    Object object = live_.at(address);
    verify(address, object);
    void* moved = nullptr;
    if constexpr (requires { heap_.realloc(nullptr, newSize); }) {
      live_.erase(address);
      moved = heap_.realloc(reinterpret_cast<void*>(address), newSize);
      if (moved == nullptr) {
        ASSERT_TRUE(options.mallocMayFail);
        live_[address] = object;
        return;
      }
    } else {
      moved = heap_.malloc(newSize);
      if (moved == nullptr) {
        ASSERT_TRUE(options.mallocMayFail);
        return;
      }
      std::memcpy(moved, reinterpret_cast<void*>(address), std::min(object.size, newSize));
      live_.erase(address);
      heap_.free(reinterpret_cast<void*>(address));
    }
    // The preserved prefix must be intact; the rest is rewritten by track().
    std::size_t kept = std::min(object.size, newSize);
    ASSERT_EQ(firstMismatch(moved, kept, object.id), kept) << "realloc lost the object's contents";
    track(moved, newSize, nextId_++);
  }

  H& heap_;
  std::mt19937_64 rng_;
  std::map<std::uintptr_t, Object> live_;
  std::uint64_t nextId_ = 1;
};

}  // namespace heapkit::testing
