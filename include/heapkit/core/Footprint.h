// Bytes a top heap holds from the OS and its high-water mark: the footprint that every
// benchmark, the simulator and the tests quote.
#pragma once

#include <algorithm>
#include <cstddef>

namespace heapkit {

class Footprint {
 public:
  void add(std::size_t bytes) {
    held_ += bytes;
    peak_ = std::max(peak_, held_);
  }
  void remove(std::size_t bytes) { held_ -= bytes; }
  std::size_t held() const { return held_; }
  std::size_t peak() const { return peak_; }

 private:
  std::size_t held_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace heapkit
