// Bytes a top heap holds from the OS and its high-water mark: the footprint that every
// benchmark, the simulator and the tests quote. Also the resident part of it: bytes held
// less those the layers gave back with purge (core/HeapContract.h, PurgingHeap) and have
// not reused since, and its high-water mark.
#pragma once

#include <algorithm>
#include <cstddef>

namespace heapkit {

class Footprint {
 public:
  void add(std::size_t bytes) {
    held_ += bytes;
    peak_ = std::max(peak_, held_);
    peakResidentBeforeAdd_ = peakResident_;
    peakResident_ = std::max(peakResident_, held_ - purged_);
  }
  void remove(std::size_t bytes) { held_ -= bytes; }
  std::size_t held() const { return held_; }
  std::size_t peak() const { return peak_; }

  // Pages of held blocks given back to the OS (purge), and taken into use again (reuse).
  void purge(std::size_t bytes) { purged_ += bytes; }
  void reuse(std::size_t bytes) {
    purged_ -= bytes;
    peakResident_ = std::max(peakResident_, held_ - purged_);
    peakResidentBeforeAdd_ = peakResident_;
  }
  // Pages of the block added last that were never touched, purged right after the add (a
  // new segment's): they never were in the process's resident set, so they do not raise
  // the resident high-water mark either, as purge after add would.
  // Purged pages of a block about to be removed: they go back with it and are never
  // resident again, so the resident high-water mark is not raised by them, as reuse
  // before remove would.
  void forgetPurged(std::size_t bytes) { purged_ -= bytes; }
  void purgeUntouched(std::size_t bytes) {
    purged_ += bytes;
    peakResident_ = std::max(peakResidentBeforeAdd_, held_ - purged_);
  }
  std::size_t resident() const { return held_ - purged_; }
  std::size_t peakResident() const { return peakResident_; }
  std::size_t purged() const { return purged_; }

 private:
  std::size_t held_ = 0;
  std::size_t peak_ = 0;
  std::size_t purged_ = 0;
  std::size_t peakResident_ = 0;
  std::size_t peakResidentBeforeAdd_ = 0;  // the resident high-water mark before the latest add
};

}  // namespace heapkit
