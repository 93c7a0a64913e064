// Trace statistics (library heapkit_trace): the profile of a program's allocation
// behaviour that the DMM methodology starts from, computed in one pass.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heapkit/trace/Reader.h"

namespace heapkit::trace {

inline constexpr std::size_t kHistogramBuckets = 65;  // bucket b: sizes in [2^(b-1), 2^b), bucket 0: size 0

struct ThreadStats {
  std::uint64_t osTid = 0;
  std::uint64_t allocations = 0;  // malloc, calloc, aligned, realloc
  std::uint64_t frees = 0;
  std::uint64_t bytes = 0;
  std::uint64_t remoteFrees = 0;  // frees (and reallocs) of objects another thread allocated
  // The operations (indexes in the trace) of its first and last allocation: threads whose
  // spans overlap allocate concurrently (a design gets a heap per thread then).
  std::uint64_t firstAllocationEvent = 0;
  std::uint64_t lastAllocationEvent = 0;
};

struct LivePoint {
  std::uint64_t time = 0;     // ns
  std::uint64_t event = 0;    // operations before this point
  std::uint64_t bytes = 0;    // the largest live bytes in the interval that ends here
  std::uint64_t objects = 0;  // live objects at that moment
};

struct TraceStats {
  Header header;
  std::uint64_t events = 0;  // memory operations
  std::array<std::uint64_t, 4> allocationsByKind{};  // malloc, calloc, realloc, aligned
  std::uint64_t frees = 0;
  std::uint64_t objects = 0;
  std::uint64_t totalBytes = 0;
  std::uint64_t maxLiveBytes = 0;
  std::uint64_t maxLiveObjects = 0;
  std::uint64_t maxLiveBytesEvent = 0;
  std::uint64_t endLiveBytes = 0;  // never freed
  std::uint64_t endLiveObjects = 0;
  std::uint64_t minSize = 0, maxSize = 0;
  std::uint64_t durationNs = 0;
  std::array<std::uint64_t, kHistogramBuckets> sizeHistogram{};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> topSizes;  // (size, count), most frequent first
  // Every request size below kSmallSizesBound that occurs, ascending, with how many
  // objects of it were requested and how many were live when live bytes peaked (at
  // maxLiveBytesEvent): what size classes are fitted to (python/heapkit/sizeclasses.py).
  struct SmallSize {
    std::uint64_t size = 0, count = 0, liveAtPeak = 0;
  };
  static constexpr std::uint64_t kSmallSizesBound = 1 << 16;
  std::vector<SmallSize> smallSizes;
  std::uint64_t distinctSizes = 0;
  // Lifetimes of freed objects, in operations between allocation and free and in ns.
  std::array<std::uint64_t, kHistogramBuckets> lifetimeEventsHistogram{};
  std::uint64_t lifetimeEventsMedian = 0;  // from the histogram: a bucket's upper bound
  double lifetimeEventsMean = 0;
  double lifetimeNsMean = 0;
  std::vector<ThreadStats> threads;
  std::vector<LivePoint> liveOverTime;
  std::uint64_t traceBytes = 0;

  double averageSize() const { return objects ? static_cast<double>(totalBytes) / static_cast<double>(objects) : 0; }
  double totalToMaxRatio() const { return maxLiveBytes ? static_cast<double>(totalBytes) / static_cast<double>(maxLiveBytes) : 0; }
  double bytesPerEvent() const { return events ? static_cast<double>(traceBytes) / static_cast<double>(events) : 0; }
};

// Computes TraceStats a step at a time, so a caller can show progress on large traces.
class StatsBuilder {
 public:
  StatsBuilder(const unsigned char* trace, std::size_t size, std::size_t topSizes = 10, std::size_t livePoints = 200);
  // Reads up to maxEvents operations; false when the trace is done or bad (see failed()).
  bool step(std::uint64_t maxEvents);
  bool failed() const { return decoder_.failed() || !error_.empty(); }
  const std::string& error() const { return error_.empty() ? decoder_.error() : error_; }
  std::uint64_t offset() const { return decoder_.offset(); }
  std::uint64_t size() const { return decoder_.size(); }
  TraceStats result();  // after step() returned false without failure

 private:
  void sample(std::uint64_t time);
  void overflowed(std::uint64_t size);
  void liveChanged(std::uint64_t size, bool born);

  TraceDecoder decoder_;
  std::string error_;  // the statistics' own: totals past 64 bits
  TraceStats stats_;
  std::size_t topSizes_;
  std::size_t livePoints_;
  std::vector<std::uint64_t> sizeOf_;    // per object id
  std::vector<std::uint64_t> bornAt_;    // per object id: event number
  std::vector<std::uint64_t> bornNs_;    // per object id
  std::vector<std::uint32_t> ownerOf_;   // per object id: allocating thread
  std::vector<std::uint64_t> sizeCounts_;  // small sizes counted directly
  // Live objects per small size now, and at the last peak of live bytes. The peak's copy
  // is brought up to date only for the sizes changed since (dirtySizes_), so keeping it
  // costs O(1) per operation however often the peak moves.
  std::vector<std::uint64_t> liveBySize_, liveBySizeAtPeak_;
  std::vector<std::uint8_t> dirty_;
  std::vector<std::uint32_t> dirtySizes_;
  std::unordered_map<std::uint64_t, std::uint64_t> largeSizeCounts_;
  std::uint64_t liveBytes_ = 0, liveObjects_ = 0;
  std::uint64_t freedObjects_ = 0;
  double lifetimeEventsSum_ = 0, lifetimeNsSum_ = 0;
  std::uint64_t sampleEvery_ = 1;  // doubles as the run gets longer, keeping <= 2 * livePoints
  std::uint64_t sinceSample_ = 0;
  std::uint64_t intervalMax_ = 0, intervalMaxObjects_ = 0;
};

}  // namespace heapkit::trace
