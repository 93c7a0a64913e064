// ScalableCoreHeap: libheapkit.so's allocator for one thread, as a composition of layers.
// ScalableHeap (threads/ScalableHeap.h) gives each thread a SuperblockHeap over the same
// shared layers; this is the same composition without threads, over any top heap that
// can purge pages: MmapHeap, or the simulator's ArenaHeap (whose extents start on 64 KiB
// granules, so the superblocks' alignment masks work there too).
//
//   SuperblockHeap<Classes,                 small objects: headerless size classes, a free
//                                           list per 64 KiB superblock, lazy bump carving
//     LargeObjectHeap<                      medium blocks (spans), large blocks (cached)
//       SuperblockPool<                     empty superblocks, reused by any class
//         AdaptiveThresholdHeap<4 MiB,      freed large blocks, kept within a budget
//           SegmentHeap<Top>>>>>            4 MiB segments cut into spans of 64 KiB slices;
//                                           delayed purge of free pages within a budget
//
// Classes is ScalableSizeClasses (the 36 classes of libheapkit.so, by type) or
// SizeClassTable (any classes, by value, from ScalableCoreConfig::classes). Every other
// parameter is a value in ScalableCoreConfig, whose defaults are libheapkit.so's:
//
//   ScalableCoreConfig config;
//   config.classes = SizeClassTable(std::vector<std::size_t>{16, 48, 96, 256, 1024});
//   config.segments.purgeDelay = 1024;
//   ReservedArena<SimulatedMemory> arena;
//   ScalableCoreHeap<SizeClassTable, ArenaHeap<ReservedArena<SimulatedMemory>>> heap(config, arena, owner);
#pragma once

#include <cstddef>
#include <type_traits>

#include "heapkit/building/SegmentHeap.h"
#include "heapkit/building/SizeClasses.h"
#include "heapkit/combining/AdaptiveThresholdHeap.h"
#include "heapkit/combining/LargeObjectHeap.h"
#include "heapkit/combining/SuperblockHeap.h"
#include "heapkit/combining/SuperblockPool.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

// libheapkit.so's cache of blocks over LargeObjectConfig::spanMaxBytes: 8 blocks at most
// (each request scans them), none used for a request more than 4 times smaller, and a
// block unused for 1024 of its mallocs and frees goes back.
inline constexpr CacheLimits kScalableLargeCacheLimits{8, SIZE_MAX, 4, 1024};

// The run-time configuration of every layer (each layer's struct documents its fields).
struct ScalableCoreConfig {
  // The small-object classes, when the heap's Classes is SizeClassTable (ignored by
  // ScalableSizeClasses, whose classes are its type's).
  SizeClassTable classes{};
  // Blocks up to spanMaxBytes are spans; the budget of the cache of bigger ones.
  LargeObjectConfig large{};
  // Warm superblocks kept, and which classes take another class's without its pages.
  SuperblockPoolConfig pool{};
  // The cache of blocks over LargeObjectConfig::spanMaxBytes.
  CacheLimits cache = kScalableLargeCacheLimits;
  // Medium blocks up to this are spans of the allocating thread's own segments
  // (ScalableHeap: threads/OwnedSpanHeap.h); larger ones the shared segments'.
  std::size_t ownedSpanMaxBytes = 256 * 1024;
  // The free resident pages each thread's own segments keep at least (segments'
  // minResidentFreeBytes).
  std::size_t ownedMinResidentFreeBytes = 4 * 1024 * 1024;
  // Segments: the delay (in span operations) and the budget of free resident pages, of
  // the shared segments and of each thread's own (ScalableHeap: threads/OwnedSpanHeap.h).
  SegmentConfig segments{};
};

// The layers every thread's heap shares: medium and large blocks, the superblock pool,
// the large-block cache, the segments.
template <class Top>
using ScalableSharedLayers = LargeObjectHeap<SuperblockPool<AdaptiveThresholdHeap<4 * 1024 * 1024, SegmentHeap<Top>>>>;

template <SizeClassPolicy Classes = ScalableSizeClasses, class Top = MmapHeap>
class ScalableCoreHeap : public SuperblockHeap<Classes, ScalableSharedLayers<Top>> {
  using Base = SuperblockHeap<Classes, ScalableSharedLayers<Top>>;

 public:
  // `topArgs` construct the top heap (an ArenaHeap's arena and owner).
  template <class... TopArgs>
  explicit ScalableCoreHeap(const ScalableCoreConfig& config, TopArgs&&... topArgs)
      : Base(classesOf(config), config.large, config.pool, config.cache, config.segments,
             static_cast<TopArgs&&>(topArgs)...) {}
  ScalableCoreHeap()
    requires std::is_default_constructible_v<Top>
      : ScalableCoreHeap(ScalableCoreConfig{}) {}

 private:
  static Classes classesOf(const ScalableCoreConfig& config) {
    if constexpr (std::is_same_v<Classes, SizeClassTable>) return config.classes;
    else return Classes{};
  }
};

}  // namespace heapkit
