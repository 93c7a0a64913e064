// SegregatedFitHeap, in every valid combination of class scheme, list structure, fit,
// order, header layout, splitting, coalescing and trimming: the randomized model check
// (no overlap, alignment, contents intact, getSize covers the request) over a counted
// arena, and the arena back at zero bytes after teardown.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "heapkit/general/SegregatedFitHeap.h"
#include "heapkit/top/ArenaHeap.h"
#include "SyntheticTraces.h"
#include "support/ModelCheck.h"

namespace heapkit {
namespace {

using Arena = ReservedArena<CountedMemory>;
using Top = ArenaHeap<Arena>;
using Heap = ConfiguredSegregatedFitHeap<Top>;

std::string describe(const SegregatedFitConfig& c) {
  static const char* classes[] = {"ranges", "strict", "exact"};
  static const char* structures[] = {"sll", "dll", "tree"};
  static const char* fits[] = {"first", "next", "best", "exact", "worst"};
  static const char* orders[] = {"lifo", "fifo", "address", "size"};
  static const char* headers[] = {"size8", "size16", "tags"};
  static const char* coalescing[] = {"none", "immediate", "deferred"};
  return std::string(classes[int(c.classes)]) + "/" + structures[int(c.structure)] + "/" + fits[int(c.fit)] + "/" +
         orders[int(c.order)] + "/" + headers[int(c.header)] + "/split=" + (c.split ? "1" : "0") + "/coalesce=" +
         coalescing[int(c.coalescing)] + "/trim=" + (c.trim ? "1" : "0") + (c.region ? "/region" : "") +
         (c.perClassChunks ? "/per-class-chunks" : "");
}

SegregatedFitConfig withClasses(SizeClasses scheme) {
  SegregatedFitConfig config;
  config.classes = scheme;
  const std::size_t bounds[] = {48, 64, 128, 256, 512, 1024, 4096, 0};
  config.classCount = std::size(bounds);
  for (std::size_t i = 0; i < config.classCount; ++i) config.classBounds[i] = bounds[i];
  config.exactMaxBytes = 2048;
  return config;
}

// Every combination the validator accepts.
std::vector<SegregatedFitConfig> validConfigurations() {
  std::vector<SegregatedFitConfig> configs;
  for (auto scheme : {SizeClasses::Ranges, SizeClasses::Strict, SizeClasses::Exact})
    for (int structure = 0; structure < 3; ++structure)
      for (int fit = 0; fit < 5; ++fit)
        for (int order = 0; order < 4; ++order)
          for (int header = 0; header < 3; ++header)
            for (int split = 0; split < 2; ++split)
              for (int coalescing = 0; coalescing < 3; ++coalescing)
                for (int trim = 0; trim < 2; ++trim)
                  for (int mode = 0; mode < 3; ++mode) {  // 0 lists, 1 region, 2 per-class chunks
                    SegregatedFitConfig config = withClasses(scheme);
                    config.structure = ListStructure(structure);
                    config.fit = ListFit(fit);
                    config.order = ListOrder(order);
                    config.header = HeaderLayout(header);
                    config.split = split;
                    config.coalescing = Coalescing(coalescing);
                    config.trim = trim;
                    config.region = mode == 1;
                    config.perClassChunks = mode == 2;
                    config.chunkBytes = 16384;
                    config.maxChunkBytes = 65536;
                    config.chunkGrowthPercent = 200;
                    // A region has no lists: one configuration of them stands for all.
                    bool redundant = config.region && (structure != 1 || fit != 0 || order != 0);
                    if (!redundant && invalidSegregatedFit(config) == nullptr) configs.push_back(config);
                  }
  return configs;
}

// Runs the model check on every `stride`-th valid configuration with one size distribution.
void checkConfigurations(std::size_t distribution, std::size_t stride, std::uint64_t seed) {
  std::vector<SegregatedFitConfig> configs = validConfigurations();
  ASSERT_GT(configs.size(), 300u);
  testing::SizeDistribution sizes = testing::standardDistributions()[distribution];
  stride = static_cast<std::size_t>(static_cast<double>(stride) / sim::testScale());
  for (std::size_t i = 0; i < configs.size(); i += stride) {
    SCOPED_TRACE(describe(configs[i]) + " sizes=" + sizes.name);
    Arena arena(std::size_t{1} << 30);
    {
      Heap heap(configs[i], arena, std::uint8_t{1});
      testing::ModelChecker<Heap> checker(heap, seed + i);
      testing::ModelCheckOptions options;
      options.operations = 2500;
      options.maxLiveObjects = 300;
      checker.run(sizes, options);
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_EQ(arena.bytesHeld(), 0u) << "teardown left bytes in the arena";
  }
}

TEST(SegregatedFitHeap, EveryValidCombinationPassesTheModelCheckOnSmallSizes) { checkConfigurations(1, 1, 1); }
TEST(SegregatedFitHeap, EveryThirdCombinationPassesTheModelCheckOnGeometricSizes) { checkConfigurations(2, 3, 7); }
TEST(SegregatedFitHeap, EverySeventhCombinationPassesTheModelCheckOnTinySizes) { checkConfigurations(0, 7, 11); }

}  // namespace
}  // namespace heapkit
