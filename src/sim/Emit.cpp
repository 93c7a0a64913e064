#include "Emit.h"

#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace heapkit::sim {
namespace {

const char* kClasses[] = {"Ranges", "Strict", "Exact"};
const char* kStructures[] = {"SinglyLinked", "DoublyLinked", "SizeTree"};
const char* kFits[] = {"First", "Next", "Best", "Exact", "Worst"};
const char* kOrders[] = {"Lifo", "Fifo", "Address", "Size"};
const char* kHeaders[] = {"SizeWord8", "SizeWord16", "BoundaryTags"};
const char* kCoalescing[] = {"None", "Immediate", "Deferred"};
const char* kBuddyKinds[] = {"Binary", "Fibonacci", "Weighted", "Double"};

std::string bytes(std::size_t n) { return n == SIZE_MAX ? "heapkit::kNoBound" : std::to_string(n); }
std::string flag(bool b) { return b ? "true" : "false"; }

bool isIdentifier(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

// The bins: the spec's class bounds (block lengths) by type, the last class taking every
// longer block, or a bin per 16 bytes for exact fits (SegregatedFitHeap's policyFrom makes
// the same bins from the values).
std::string binsType(const SegregatedFitConfig& c) {
  if (c.classes == SizeClasses::Exact) return "heapkit::ExactBins<" + std::to_string(c.exactMaxBytes) + ">";
  std::string bins = "heapkit::FixedBins<";
  for (std::size_t i = 0; i + 1 < c.classCount; ++i) {
    bins += std::to_string(c.classBounds[i]) + ", ";
    if (i % 12 == 11) bins += "\n                     ";
  }
  return bins + "heapkit::kNoBound>";
}

// A free-list allocator as the type expression of its layers (general/SegregatedFitHeap.h):
// bins, fits, lists, over the chunk layer with its header layout.
std::string freeListHeap(const std::string& name, const SegregatedFitConfig& c) {
  return "template <class Top>\n"
         "using " + name + " = heapkit::SegregatedFitHeap<\n"
         "    " + binsType(c) + ",\n"
         "    heapkit::Fits<heapkit::SizeClasses::" + kClasses[int(c.classes)] + ", /*search larger classes*/ " +
         flag(c.searchLargerClasses) + ", /*split*/ " + flag(c.split) + ", heapkit::Coalescing::" +
         kCoalescing[int(c.coalescing)] + (c.region ? ", /*region*/ true" : "") + ">,\n"
         "    heapkit::Lists<heapkit::ListStructure::" + kStructures[int(c.structure)] + ", heapkit::ListFit::" +
         kFits[int(c.fit)] + ", heapkit::ListOrder::" + kOrders[int(c.order)] + ">,\n"
         "    heapkit::TailChunkHeap<heapkit::Chunks</*bytes*/ " + std::to_string(c.chunkBytes) + ", /*max bytes*/ " +
         std::to_string(c.maxChunkBytes) + ", /*growth %*/ " + std::to_string(c.chunkGrowthPercent) + ", /*trim*/ " +
         flag(c.trim) + ", /*a tail per class*/ " + flag(c.perClassChunks) + ">,\n"
         "                           heapkit::Headers<heapkit::HeaderLayout::" + kHeaders[int(c.header)] + ">, Top>>;\n";
}

std::string buddyConfig(const std::string& name, const BuddyConfig& b) {
  return "struct " + name + " {\n"
         "  static constexpr heapkit::BuddyKind kind = heapkit::BuddyKind::" + kBuddyKinds[int(b.kind)] + ";\n"
         "  static constexpr std::size_t minBlockBytes = " + std::to_string(b.minBlockBytes) + ";\n"
         "  static constexpr std::size_t areaBytes = " + std::to_string(b.areaBytes) + ";\n"
         "  static constexpr bool coalesce = " + flag(b.coalesce) + ";\n"
         "  static constexpr bool trim = " + flag(b.trim) + ";\n"
         "};\n";
}

bool defaultClasses(const PageSegregatedSpec& p) {
  if (p.classCount != ScalableSizeClasses::count()) return false;
  for (std::size_t i = 0; i < p.classCount; ++i)
    if (p.classBytes[i] != ScalableSizeClasses::bytesOf(i)) return false;
  return true;
}

// The classes by type (libheapkit.so's own when the spec keeps them), and the rest of
// ScalableCoreConfig as the values a default-constructed Config holds.
std::string pageSegregatedConfig(const std::string& name, const PageSegregatedSpec& p) {
  const PageSegregatedSpec& c = p;
  std::string classes = "heapkit::ScalableSizeClasses";
  if (!defaultClasses(p)) {
    classes = "heapkit::FixedSizeClasses<";
    for (std::size_t i = 0; i < p.classCount; ++i) {
      if (i != 0) classes += ", ";
      classes += std::to_string(p.classBytes[i]);
    }
    classes += ">";
  }
  return "using " + name + "Classes = " + classes + ";\n"
         "struct " + name + "Config : heapkit::ScalableCoreConfig {\n"
         "  " + name + "Config() {\n"
         "    large.spanMaxBytes = " + std::to_string(c.large.spanMaxBytes) + ";\n"
         "    segments.purgeDelay = " + std::to_string(c.segments.purgeDelay) + ";\n"
         "    segments.minResidentFreeBytes = " + std::to_string(c.segments.minResidentFreeBytes) + ";\n"
         "    segments.maxResidentFreeBytes = " + std::to_string(c.segments.maxResidentFreeBytes) + ";\n"
         "    segments.inUsePercent = " + std::to_string(c.segments.inUsePercent) + ";\n"
         "    segments.belowPeak = " + (c.segments.belowPeak ? "true" : "false") + ";\n"
         "    pool.warmSuperblocks = " + std::to_string(c.pool.warmSuperblocks) + ";\n"
         "    cache.maxObjects = " + std::to_string(c.cache.maxObjects) + ";\n"
         "    cache.fitSlack = " + std::to_string(c.cache.fitSlack) + ";\n"
         "    cache.idleOperations = " + std::to_string(c.cache.idleOperations) + ";\n"
         "  }\n"
         "};\n";
}

// What emitting a design's allocators gathers: the configurations and type aliases, and
// which headers they need.
struct Emitted {
  std::string configs;
  bool freeLists = false, buddy = false, kingsley = false, lea = false, adaptiveLea = false, pageSegregated = false;

  // Allocator `name`'s configuration and alias into configs; returns its template and
  // Config arguments (", Config", or nothing where the type holds every value) for a
  // SizeRange or ShortLivedArea. A
  // thread-aware design (threadAware) gives each thread of a trace its heap, as the
  // simulator runs it (DmmHeap): the replayer names the thread whose calls follow.
  std::string allocator(const std::string& name, const AllocatorSpec& a, const std::string& comment,
                        bool threadAware = false) {
    if (a.mechanism == Mechanism::Kingsley) {
      kingsley = true;
      configs += comment + "//   heapkit::KingsleyHeap<Top>\n\n";
      return "heapkit::KingsleyHeap";
    }
    if (a.mechanism == Mechanism::Lea) {
      lea = true;
      configs += comment + "//   heapkit::LeaHeap<Top>\n\n";
      return "heapkit::LeaHeap";
    }
    if (a.mechanism == Mechanism::AdaptiveLea) {
      adaptiveLea = true;
      configs += comment + "//   heapkit::AdaptiveLeaHeap<Top>\n\n";
      return "heapkit::AdaptiveLeaHeap";
    }
    if (a.mechanism == Mechanism::PageSegregated) {
      pageSegregated = true;
      std::string heap = threadAware ? "heapkit::ScalableHeap<Top, " + name + "Classes, " + name +
                                           "Config, heapkit::SelectedThreadHeaps>"
                                     : "heapkit::ScalableCoreHeap<" + name + "Classes, Top>";
      configs += comment + pageSegregatedConfig(name, a.pageSegregated) + "template <class Top>\nusing " + name + " = " +
                 heap + ";\n\n";
    } else if (isBuddy(a.mechanism)) {
      buddy = true;
      configs += comment + buddyConfig(name + "Config", a.buddy) + "template <class Top>\nusing " + name +
                 " = heapkit::BuddyHeap<" + name + "Config, Top>;\n\n";
    } else {
      freeLists = true;
      configs += comment + freeListHeap(name, a.freeLists) + "\n";
      return name;  // every value is in the type
    }
    return name + ", " + name + "Config";
  }
};

}  // namespace

bool isThreadAware(const DmmSpec& dmm) { return threadAware(dmm); }
bool isDirect(const DmmSpec& dmm) { return direct(dmm); }

std::string emitHeader(const ParsedSpec& spec, const std::string& ns, const std::string& source) {
  if (!isIdentifier(ns)) throw SpecError("'" + ns + "' is not a C++ identifier to name the design's namespace");
  const DmmSpec& dmm = spec.dmm;
  std::string ranges, firstRange, includes = "#include <cstddef>\n#include <cstdint>\n\n#include <heapkit/dmm/StaticDmmHeap.h>\n";
  Emitted emitted;
  for (std::size_t i = 0; i < dmm.count; ++i) {
    const AllocatorSpec& a = dmm.allocators[i];
    std::string index = std::to_string(i);
    std::string comment = "// allocator " + index + ": " + kMechanismNames[std::size_t(a.mechanism)] + ", requests in (" +
                          std::to_string(a.minExclusive) + ", " +
                          (a.maxInclusive == SIZE_MAX ? std::string("no bound") : std::to_string(a.maxInclusive)) + "]\n";
    std::string range = "heapkit::SizeRange<" + std::to_string(a.minExclusive) + ", " + bytes(a.maxInclusive) + ", " +
                        emitted.allocator("Allocator" + index, a, comment, threadAware(dmm)) + ">";
    if (i == 0) firstRange = range;
    ranges += "    " + range + (i + 1 < dmm.count ? ",\n" : "");
  }
  if (dmm.hasShortLived) {
    const ShortLivedSizes& sizes = dmm.shortLived.sizes;
    std::string list;
    for (std::size_t i = 0; i < sizes.rangeCount(); ++i)
      list += (i == 0 ? "{" : ", {") + std::to_string(sizes.range(i).first) + ", " + std::to_string(sizes.range(i).second) + "}";
    std::string comment = "// the short-lived area (placement by lifetime): " +
                          std::string(kMechanismNames[std::size_t(dmm.shortLived.allocator.mechanism)]) +
                          ", requests of the sizes below, whatever range holds them\n"
                          "struct ShortLivedSizes {\n"
                          "  static constexpr heapkit::ShortLivedSizes sizes = heapkit::ShortLivedSizes::of({" + list + "});\n"
                          "};\n";
    ranges += ",\n    heapkit::ShortLivedArea<ShortLivedSizes, " +
              emitted.allocator("ShortLived", dmm.shortLived.allocator, comment) + ">";
  }
  const std::string& configs = emitted.configs;
  bool freeLists = emitted.freeLists, buddy = emitted.buddy, kingsley = emitted.kingsley, lea = emitted.lea,
       adaptiveLea = emitted.adaptiveLea, pageSegregated = emitted.pageSegregated;
  if (freeLists) includes += "#include <heapkit/general/SegregatedFitHeap.h>\n";
  if (buddy) includes += "#include <heapkit/general/BuddyHeap.h>\n";
  if (kingsley) includes += "#include <heapkit/general/KingsleyHeap.h>\n";
  if (lea) includes += "#include <heapkit/general/LeaHeap.h>\n";
  if (adaptiveLea) includes += "#include <heapkit/general/AdaptiveLeaHeap.h>\n";
  if (pageSegregated) includes += "#include <heapkit/general/ScalableCoreHeap.h>\n";
  bool heapPerThread = threadAware(dmm);
  std::string shipped;
  if (heapPerThread) {
    includes += "#include <heapkit/threads/ScalableHeap.h>\n#include <heapkit/threads/SelectedThreadHeaps.h>\n";
    shipped = "// The same layers as libheapkit.so ships them: a heap per thread over the shared layers,\n"
              "// from Top (MmapHeap, hardened) instead of the arena. `heapkit build` builds this one.\n"
              "template <class Top = heapkit::Hardened<heapkit::MmapHeap>>\n"
              "using ThreadAware = heapkit::ScalableHeap<Top, Allocator0Classes, Allocator0Config>;\n\n";
  }
  bool unrouted = direct(dmm);
  if (unrouted) {
    includes += "#include <heapkit/core/Hardening.h>\n#include <heapkit/top/MmapHeap.h>\n";
    shipped = "// The allocator as heapkit's single-heap libraries ship theirs (libheapkit-lea.so's\n"
              "// AdaptiveLeaHeap<Hardened<MmapHeap>>): every request is its, so it needs neither the\n"
              "// routing nor the arena, and takes its pages from Top (MmapHeap, hardened).\n"
              "// `heapkit build` builds this one, behind a lock.\n"
              "template <class Top = heapkit::Hardened<heapkit::MmapHeap>>\n"
              "using Direct = heapkit::DirectAllocator<" + firstRange + ", Top>;\n\n";
  }
  std::string fallback = dmm.fallback == DmmSpec::kFallbackToOs ? "heapkit::kFallbackToOs" : std::to_string(dmm.fallback);
  return "// " + (spec.name.empty() ? std::string("A DMM design") : "The DMM design \"" + spec.name + "\"") +
         ", written by `heapkit emit` from " + source + ".\n"
         "// The layers the simulator ran, with the spec's values as compile-time constants:\n"
         "//   " + ns + "::Dmm<heapkit::RealMemory>       the design over real memory (as libheapkit-dmm.so runs it)\n"
         "//   " + ns + "::Dmm<heapkit::SimulatedMemory>  the same over simulated memory, counting work\n" +
         (heapPerThread ? "//   (a heap per thread of a trace: selectThread(t) names the thread whose calls follow)\n"
                      : std::string()) +
         (heapPerThread ? "//   " + ns + "::ThreadAware<>                  its allocator as a thread-aware heap over mmap (libheapkit.so's form)\n"
                      : std::string()) +
         (unrouted ? "//   " + ns + "::Direct<>                       its allocator directly over mmap (how heapkit's libraries ship one)\n"
                   : std::string()) +
         "// Normalised spec: " + spec.normalized + "\n"
         "#pragma once\n\n" + includes + "\nnamespace " + ns + " {\n\n" + configs +
         "// Requests above the last range: " +
         (dmm.fallback == DmmSpec::kFallbackToOs ? std::string("pages of their own from the arena")
                                                 : "allocator " + std::to_string(dmm.fallback)) +
         ".\ntemplate <class Memory = heapkit::RealMemory>\nusing Dmm = heapkit::StaticDmmHeap<Memory, " + fallback +
         ",\n" + ranges + ">;\n\n" + shipped + "}  // namespace " + ns + "\n";
}

}  // namespace heapkit::sim
