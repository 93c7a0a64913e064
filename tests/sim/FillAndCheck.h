// The fidelity tests' check of the real allocator: every usable byte of every object is
// written with the object's id when it is allocated and checked when it is freed, so that
// a real run that overlaps two objects shows as corruptions (TraceApplier's observer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace heapkit::sim {

struct FillAndCheck {
  std::size_t* corruptions;
  static std::uint8_t byteOf(std::uint64_t id) { return static_cast<std::uint8_t>(id * 131 + 7); }
  void written(void* object, std::uint64_t usable, std::uint64_t id) { std::memset(object, byteOf(id), usable); }
  void freeing(void* object, std::uint64_t usable, std::uint64_t id) {
    auto* bytes = static_cast<const std::uint8_t*>(object);
    for (std::uint64_t i = 0; i < usable; ++i) {
      if (bytes[i] != byteOf(id)) {
        ++*corruptions;
        return;
      }
    }
  }
};

}  // namespace heapkit::sim
