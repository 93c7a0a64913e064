// StatsBuilder: one pass over a trace (heapkit/trace/Stats.h).
#include "heapkit/trace/Stats.h"

#include <algorithm>
#include <bit>

namespace heapkit::trace {

namespace {
constexpr std::uint64_t kDirectSizes = 1 << 16;  // sizes below this are counted in an array

std::size_t bucketOf(std::uint64_t value) { return static_cast<std::size_t>(std::bit_width(value)); }
}  // namespace

StatsBuilder::StatsBuilder(const unsigned char* trace, std::size_t size, std::size_t topSizes, std::size_t livePoints)
    : decoder_(trace, size), topSizes_(topSizes), livePoints_(std::max<std::size_t>(livePoints, 2)), sizeCounts_(kDirectSizes),
      liveBySize_(kDirectSizes), liveBySizeAtPeak_(kDirectSizes), dirty_(kDirectSizes) {
  static_assert(TraceStats::kSmallSizesBound == kDirectSizes);
  stats_.header = decoder_.header();
  stats_.traceBytes = size;
}

void StatsBuilder::sample(std::uint64_t time) {
  stats_.liveOverTime.push_back({time, stats_.events, intervalMax_, intervalMaxObjects_});
  intervalMax_ = liveBytes_;
  intervalMaxObjects_ = liveObjects_;
  sinceSample_ = 0;
  auto& points = stats_.liveOverTime;
  if (points.size() >= 2 * livePoints_) {
    // Halve the resolution: each pair becomes its later point with the larger peak.
    std::size_t n = 0;
    for (std::size_t i = 0; i + 1 < points.size(); i += 2) {
      LivePoint merged = points[i + 1];
      if (points[i].bytes > merged.bytes) {
        merged.bytes = points[i].bytes;
        merged.objects = points[i].objects;
      }
      points[n++] = merged;
    }
    points.resize(n);
    sampleEvery_ *= 2;
  }
}

void StatsBuilder::overflowed(std::uint64_t size) {
  error_ = "offset " + std::to_string(decoder_.offset()) + ": an object of " + std::to_string(size) +
           " bytes takes the total allocated past 2^64 bytes";
}

void StatsBuilder::liveChanged(std::uint64_t size, bool born) {
  if (size >= kDirectSizes) return;
  if (born) ++liveBySize_[size];
  else --liveBySize_[size];
  if (!dirty_[size]) {
    dirty_[size] = 1;
    dirtySizes_.push_back(static_cast<std::uint32_t>(size));
  }
}

bool StatsBuilder::step(std::uint64_t maxEvents) {
  if (!error_.empty()) return false;
  Event e;
  for (std::uint64_t n = 0; n < maxEvents; ++n) {
    if (!decoder_.next(e)) return false;
    TraceStats& s = stats_;
    if (e.thread >= s.threads.size()) {
      std::size_t known = s.threads.size();
      s.threads.resize(e.thread + 1);
      for (std::size_t t = known; t < s.threads.size(); ++t) s.threads[t].osTid = decoder_.osThreadIds()[t];
    }
    ThreadStats& thread = s.threads[e.thread];
    auto end = [&](std::uint64_t id) {
      liveBytes_ -= sizeOf_[id];
      liveChanged(sizeOf_[id], false);
      --liveObjects_;
      ++freedObjects_;
      std::uint64_t lifetime = s.events - bornAt_[id];
      ++s.lifetimeEventsHistogram[bucketOf(lifetime)];
      lifetimeEventsSum_ += static_cast<double>(lifetime);
      lifetimeNsSum_ += static_cast<double>(e.time - bornNs_[id]);
      if (ownerOf_[id] != e.thread) ++thread.remoteFrees;
    };
    if (e.op == Op::Free) {
      end(e.id);
      ++s.frees;
      ++thread.frees;
    } else {
      if (e.op == Op::Realloc) end(e.oldId);
      s.allocationsByKind[static_cast<std::size_t>(e.op)]++;
      if (thread.allocations == 0) thread.firstAllocationEvent = s.events;
      thread.lastAllocationEvent = s.events;
      ++thread.allocations;
      thread.bytes += e.size;
      sizeOf_.push_back(e.size);
      bornAt_.push_back(s.events);
      bornNs_.push_back(e.time);
      ownerOf_.push_back(e.thread);
      if (s.objects == 0 || e.size < s.minSize) s.minSize = e.size;
      s.maxSize = std::max(s.maxSize, e.size);
      ++s.objects;
      // Sizes are at most 2^56 (the decoder checks), so only a trace of more than 2^8
      // such objects overflows: not a program's.
      if (__builtin_add_overflow(s.totalBytes, e.size, &s.totalBytes)) [[unlikely]] {
        overflowed(e.size);
        return false;
      }
      ++s.sizeHistogram[bucketOf(e.size)];
      if (e.size < kDirectSizes) ++sizeCounts_[e.size];
      else ++largeSizeCounts_[e.size];
      liveBytes_ += e.size;
      ++liveObjects_;
      liveChanged(e.size, true);
      if (liveBytes_ > s.maxLiveBytes) {
        s.maxLiveBytes = liveBytes_;
        s.maxLiveBytesEvent = s.events;
        for (std::uint32_t size : dirtySizes_) {
          liveBySizeAtPeak_[size] = liveBySize_[size];
          dirty_[size] = 0;
        }
        dirtySizes_.clear();
      }
      s.maxLiveObjects = std::max(s.maxLiveObjects, liveObjects_);
    }
    ++s.events;
    if (liveBytes_ > intervalMax_) {
      intervalMax_ = liveBytes_;
      intervalMaxObjects_ = liveObjects_;
    }
    s.durationNs = e.time;
    if (++sinceSample_ >= sampleEvery_) sample(e.time);
  }
  return true;
}

TraceStats StatsBuilder::result() {
  TraceStats s = stats_;
  if (sinceSample_ > 0 || s.liveOverTime.empty()) s.liveOverTime.push_back({s.durationNs, s.events, intervalMax_, intervalMaxObjects_});
  s.endLiveBytes = liveBytes_;
  s.endLiveObjects = liveObjects_;
  for (std::size_t t = s.threads.size(); t < decoder_.osThreadIds().size(); ++t) s.threads.push_back({decoder_.osThreadIds()[t]});
  std::vector<std::pair<std::uint64_t, std::uint64_t>> counts;  // (count, size)
  for (std::uint64_t size = 0; size < kDirectSizes; ++size)
    if (sizeCounts_[size] != 0) counts.push_back({sizeCounts_[size], size});
  for (auto [size, count] : largeSizeCounts_) counts.push_back({count, size});
  s.distinctSizes = counts.size();
  for (std::uint64_t size = 0; size < kDirectSizes; ++size)
    if (sizeCounts_[size] != 0) s.smallSizes.push_back({size, sizeCounts_[size], liveBySizeAtPeak_[size]});
  std::size_t top = std::min(topSizes_, counts.size());
  std::partial_sort(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(top), counts.end(),
                    [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (std::size_t i = 0; i < top; ++i) s.topSizes.push_back({counts[i].second, counts[i].first});
  if (freedObjects_ > 0) {
    s.lifetimeEventsMean = lifetimeEventsSum_ / static_cast<double>(freedObjects_);
    s.lifetimeNsMean = lifetimeNsSum_ / static_cast<double>(freedObjects_);
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < kHistogramBuckets; ++b) {
      seen += s.lifetimeEventsHistogram[b];
      if (2 * seen >= freedObjects_) {
        s.lifetimeEventsMedian = b == 0 ? 0 : (b >= 64 ? UINT64_MAX : (std::uint64_t{1} << b) - 1);
        break;
      }
    }
  }
  return s;
}

}  // namespace heapkit::trace
