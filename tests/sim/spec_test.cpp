// DMM specs: every kind of bad spec is one error naming the field's path; normalisation
// gives one text per design. And small traces whose footprint and work are derived by hand
// here (not by running the code) for several mechanisms.
#include <gtest/gtest.h>

#include <string>

#include "Spec.h"
#include "TraceApplier.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/wrapper/ANSIWrapper.h"

namespace heapkit::sim {
namespace {

std::string specWith(const std::string& allocators, const std::string& extra = "") {
  return R"({"format": "heapkit-dmm/1", "allocators": [)" + allocators + "]" + extra + "}";
}

std::string errorOf(const std::string& text) {
  try {
    parseSpec(text);
  } catch (const SpecError& error) {
    return error.what();
  }
  return "(accepted)";
}

TEST(Spec, EveryBadSpecIsOneErrorNamingTheField) {
  struct Case {
    std::string text;
    std::string error;
  };
  const Case cases[] = {
      {"{", "not valid JSON: line 1, column 2: expected a quoted member name"},
      {"{\"format\": \"heapkit-dmm/1\",\n \"allocators\": [}", "not valid JSON: line 2, column 17: unexpected character '}'"},
      {"[]", "spec: expected an object, found an array"},
      {R"({"allocators": []})", "format: missing"},
      {R"({"format": "heapkit-dmm/9", "allocators": []})", "format: \"heapkit-dmm/9\" is not a format this heapkit reads"},
      {R"({"format": "heapkit-dmm/1"})", "allocators: missing"},
      {R"({"format": "heapkit-dmm/1", "allocators": [], "extra": 1})", "spec.extra: not a field of a DMM spec"},
      {specWith(R"({"range": [0, null], "mechanism": "lea", "bogus": 1})"),
       "allocators[0].bogus: not a field of a lea allocator"},
      {specWith(R"({"range": [0, null], "mechanism": "quantum"})"), "allocators[0].mechanism: \"quantum\" is not one of"},
      {specWith(R"({"range": [0, 100], "mechanism": "kingsley"}, {"range": [200, null], "mechanism": "lea"})"),
       "allocators[1].range[0]: leaves a gap after the previous allocator's range, which ends at 100"},
      {specWith(R"({"range": [0, 100], "mechanism": "kingsley"}, {"range": [50, null], "mechanism": "lea"})"),
       "allocators[1].range[0]: overlaps the previous allocator's range, which ends at 100"},
      {specWith(R"({"range": [8, null], "mechanism": "kingsley"})"), "allocators[0].range[0]: the first allocator's range starts at 0"},
      {specWith(R"({"range": [0, 0], "mechanism": "kingsley"})"), "allocators[0].range[1]: 0 is outside 1.."},
      {specWith(R"({"range": [0, -5], "mechanism": "kingsley"})"), "allocators[0].range[1]: expected a whole number of bytes"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_lists", "header": "size8", "coalesce": "immediate"})"),
       "allocators[0].coalesce: coalescing needs boundary tags"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_lists", "list": {"fit": "bestest"}})"),
       "allocators[0].list.fit: \"bestest\" is not one of first, next, best, exact, worst"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_lists", "list": {"structure": "size_tree", "fit": "next"}})"),
       "allocators[0].list.fit: next fit has no meaning in a size-ordered tree"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_lists", "list": {"order": "size"}})"),
       "allocators[0].list.order: a size tree is ordered by size"},
      {specWith(R"({"range": [0, null], "mechanism": "strict_segregated_fit", "split": true})"),
       "allocators[0].split: strict and exact classes keep every block at its class's length"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_lists", "coalesce": "none", "trim": true})"),
       "allocators[0].trim: a chunk can only be found wholly free when blocks coalesce"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_fit"})"), "allocators[0].class_sizes: missing"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_fit", "class_sizes": [64, 60]})"),
       "allocators[0].class_sizes[1]: class sizes must ascend"},
      {specWith(R"({"range": [0, null], "mechanism": "segregated_lists", "chunk": {"bytes": 5000}})"),
       "allocators[0].chunk.bytes: a whole number of 4 KiB pages"},
      {specWith(R"({"range": [0, 4194304], "mechanism": "exact_segregated_fit"})"),
       "allocators[0].range: exact segregated fit keeps a list per length"},
      {specWith(R"({"range": [0, null], "mechanism": "simple_segregated_storage", "list": {"fit": "best"}})"),
       "allocators[0].list: not a field of a simple_segregated_storage allocator"},
      {specWith(R"({"range": [0, 100], "mechanism": "kingsley"})", R"(, "fallback": 3)"), "fallback: 3 is outside 0..0"},
      {specWith(R"({"range": [0, null], "mechanism": "kingsley"})", R"(, "fallback": 0)"),
       "fallback: the last allocator's range has no bound"},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "class_sizes": [16, 24]})"),
       "allocators[0].class_sizes: a size class is not a positive multiple of 16 bytes"},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "class_sizes": [32, 16]})"),
       "allocators[0].class_sizes: size classes are not in ascending order"},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "class_sizes": [16, 65536]})"),
       "allocators[0].class_sizes[1]: 65536 is outside 16..32768"},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "span_max_bytes": 1024})"),
       "allocators[0].span_max_bytes: 1024 is outside 65536.."},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "resident_free": {"min_bytes": 9, "max_bytes": 8}})"),
       "allocators[0].resident_free.max_bytes: at least min_bytes (9)"},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "large_cache": {"fit_slack": 0}})"),
       "allocators[0].large_cache.fit_slack: 0 is outside 1.."},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "large_cache": {"slots": 1}})"),
       "allocators[0].large_cache.slots: not a field of a large_cache policy"},
      {specWith(R"({"range": [0, null], "mechanism": "page_segregated", "header": "size8"})"),
       "allocators[0].header: not a field of a page_segregated allocator"},
      {specWith(R"({"range": [0, null], "mechanism": "adaptive_lea", "classes": 3})"),
       "allocators[0].classes: not a field of a adaptive_lea allocator"},
  };
  const std::string lea = R"({"range": [0, null], "mechanism": "lea"})";
  const Case shortLived[] = {
      {specWith(lea, R"(, "short_lived": {"allocator": {"mechanism": "lea"}})"), "short_lived.sizes: missing"},
      {specWith(lea, R"(, "short_lived": {"sizes": [], "allocator": {"mechanism": "lea"}})"),
       "short_lived.sizes: at least one range"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[0, 40]], "allocator": {"mechanism": "lea"}})"),
       "short_lived.sizes[0]: range bounds are multiples of 16"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[0, 64], [32, 96]], "allocator": {"mechanism": "lea"}})"),
       "short_lived.sizes[1]: ranges ascend without overlapping"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[0, 131072]], "allocator": {"mechanism": "lea"}})"),
       "short_lived.sizes[0][1]: 131072 is outside 0..65536"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[64, 64]], "allocator": {"mechanism": "lea"}})"),
       "short_lived.sizes[0]: max must be above min"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[0, 64]]})"), "short_lived.allocator: missing"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[0, 64]], "allocator": {"range": [0, 64], "mechanism": "lea"}})"),
       "short_lived.allocator.range: the short-lived area takes its sizes, not a range"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[0, 64]], "allocator": {"mechanism": "kingsley", "split": true}})"),
       "short_lived.allocator.split: not a field of a kingsley allocator"},
      {specWith(lea, R"(, "short_lived": {"sizes": [[0, 64]], "allocator": {"mechanism": "lea"}, "age": 3})"),
       "short_lived.age: not a field of a short-lived area"},
  };
  for (const Case& c : shortLived) {
    std::string error = errorOf(c.text);
    EXPECT_NE(error.find(c.error), std::string::npos) << "spec: " << c.text << "\n error: " << error
                                                      << "\n wanted: " << c.error;
  }
  for (const Case& c : cases) {
    std::string error = errorOf(c.text);
    EXPECT_NE(error.find(c.error), std::string::npos) << "spec: " << c.text << "\n error: " << error
                                                      << "\n wanted: " << c.error;
  }
}

// Placement by lifetime: the short-lived area's sizes and allocator (its defaults spelled
// out, no range) follow the fallback in the normal form, and requests of those sizes go to
// the area whatever range holds them; others, and sizes between its ranges, do not.
TEST(Spec, AShortLivedAreaIsNormalisedAndServesItsSizes) {
  ParsedSpec spec = parseSpec(specWith(R"({"range": [0, null], "mechanism": "lea"})",
                                       R"(, "short_lived": {"sizes": [[0, 64], [128, 256]],
                                            "allocator": {"mechanism": "segregated_lists", "classes": 4}})"));
  EXPECT_EQ(spec.normalized, R"({"format":"heapkit-dmm/1","allocators":[{"range":[0,null],"mechanism":"lea"}],)"
                             R"("fallback":"os","short_lived":{"sizes":[[0,64],[128,256]],"allocator":{)"
                             R"("mechanism":"segregated_lists","classes":4,"header":"boundary_tags",)"
                             R"("list":{"structure":"doubly_linked","fit":"first","order":"lifo"},"split":true,)"
                             R"("coalesce":"immediate","trim":false,"chunk":{"bytes":65536,"max_bytes":65536,"growth":1}}}})");
  EXPECT_EQ(parseSpec(spec.normalized).normalized, spec.normalized);
  const ShortLivedSizes& sizes = spec.dmm.shortLived.sizes;
  for (std::size_t size : {1, 16, 64, 129, 200, 256}) EXPECT_TRUE(sizes.contains(size)) << size;
  for (std::size_t size : {0, 65, 100, 128, 257, 65536, 1 << 20}) EXPECT_FALSE(sizes.contains(size)) << size;
  ANSIWrapper<DmmHeap<CountedMemory>> heap(spec.dmm, std::size_t{1} << 30);
  void* young = heap.malloc(200);
  void* old = heap.malloc(100);
  EXPECT_EQ(heap.arena().ownerOf(young), 3) << "allocator count + 2: the short-lived area";
  EXPECT_EQ(heap.arena().ownerOf(old), 1);
  EXPECT_EQ(heap.usage(2).requests, 1u);
  EXPECT_EQ(heap.usage(0).requests, 1u);
  heap.free(young);
  heap.free(old);
}

TEST(Spec, NormalisationGivesOneTextPerDesign) {
  std::string terse = specWith(R"({"range": [0, null], "mechanism": "segregated_lists"})");
  std::string explicitDefaults = R"({"format": "heapkit-dmm/1", "name": "same design", "allocators": [
      {"mechanism": "segregated_lists", "range": [0, null], "classes": 8, "header": "boundary_tags",
       "list": {"structure": "doubly_linked", "fit": "first", "order": "lifo"}, "split": true,
       "coalesce": "immediate", "trim": false, "chunk": {"bytes": 65536, "max_bytes": 65536, "growth": 1}}],
      "fallback": "os"})";
  ParsedSpec a = parseSpec(terse), b = parseSpec(explicitDefaults);
  EXPECT_EQ(a.normalized, b.normalized);
  EXPECT_EQ(b.name, "same design");
  EXPECT_EQ(parseSpec(a.normalized).normalized, a.normalized) << "the normalised text is itself a valid spec";
  ParsedSpec other = parseSpec(specWith(R"({"range": [0, null], "mechanism": "segregated_lists", "classes": 9})"));
  EXPECT_NE(other.normalized, a.normalized);
}

// page_segregated's normal form spells out every default: libheapkit.so's 36 classes and
// ScalableCoreConfig's values.
TEST(Spec, PageSegregatedNormalFormSpellsOutLibheapkitsDefaults) {
  ParsedSpec terse = parseSpec(specWith(R"({"range": [0, null], "mechanism": "page_segregated"})"));
  std::string classes;
  for (std::size_t i = 0; i < ScalableSizeClasses::count(); ++i) {
    if (i != 0) classes += ',';
    classes += std::to_string(ScalableSizeClasses::bytesOf(i));
  }
  EXPECT_EQ(terse.normalized, R"({"format":"heapkit-dmm/1","allocators":[{"range":[0,null],"mechanism":"page_segregated",)"
                              R"("class_sizes":[)" + classes + R"(],"span_max_bytes":33554432,"purge_delay":16384,)"
                              R"("resident_free":{"min_bytes":4194304,"max_bytes":134217728,"in_use_percent":150},)"
                              R"("warm_superblocks":64,"large_cache":{"max_blocks":8,"fit_slack":4,"idle_operations":1024}}],)"
                              R"("fallback":"os"})");
  EXPECT_EQ(parseSpec(terse.normalized).normalized, terse.normalized);
  ParsedSpec fitted = parseSpec(specWith(R"({"range": [0, null], "mechanism": "page_segregated", "class_sizes": [16, 48],
      "purge_delay": 7, "large_cache": {"max_blocks": 2}})"));
  EXPECT_NE(fitted.normalized.find(R"("class_sizes":[16,48],)"), std::string::npos) << fitted.normalized;
  EXPECT_NE(fitted.normalized.find(R"("purge_delay":7,)"), std::string::npos);
  EXPECT_NE(fitted.normalized.find(R"("large_cache":{"max_blocks":2,"fit_slack":4,)"), std::string::npos);
  const PageSegregatedSpec& p = fitted.dmm.allocators[0].pageSegregated;
  EXPECT_EQ(p.classCount, 2u);
  ScalableCoreConfig config = p.coreConfig();
  EXPECT_EQ(config.classes.count(), 2u);
  EXPECT_EQ(config.classes.bytesOf(1), 48u);
  EXPECT_EQ(config.segments.purgeDelay, 7u);
  EXPECT_EQ(config.cache.maxObjects, 2u);
  // below_peak is written only when set: the designs without it keep their keys.
  ParsedSpec capped = parseSpec(specWith(R"({"range": [0, null], "mechanism": "page_segregated",
      "resident_free": {"min_bytes": 0, "max_bytes": 4194304, "in_use_percent": 25, "below_peak": true}})"));
  EXPECT_NE(capped.normalized.find(R"("in_use_percent":25,"below_peak":true},)"), std::string::npos) << capped.normalized;
  EXPECT_TRUE(capped.dmm.allocators[0].pageSegregated.coreConfig().segments.belowPeak);
  EXPECT_FALSE(config.segments.belowPeak);
  EXPECT_EQ(parseSpec(capped.normalized).normalized, capped.normalized);
  EXPECT_EQ(parseSpec(specWith(R"({"range": [0, null], "mechanism": "page_segregated",
      "resident_free": {"below_peak": false}})")).normalized.find("below_peak"), std::string::npos);
  EXPECT_THROW(parseSpec(specWith(R"({"range": [0, null], "mechanism": "page_segregated",
      "resident_free": {"below_peak": 1}})")), SpecError);
  EXPECT_EQ(parseSpec(specWith(R"({"range": [0, null], "mechanism": "page_segregated", "class_sizes": []})"))
                .dmm.allocators[0].pageSegregated.classCount, 0u) << "no classes: every request is a span or a block";
  EXPECT_EQ(parseSpec(specWith(R"({"range": [0, null], "mechanism": "adaptive_lea"})")).normalized,
            R"({"format":"heapkit-dmm/1","allocators":[{"range":[0,null],"mechanism":"adaptive_lea"}],"fallback":"os"})");
}

// ---- hand-computed traces -------------------------------------------------------------------

using Heap = ANSIWrapper<DmmHeap<CountedMemory>>;

TEST(HandComputed, KingsleyFootprintAndWork) {
  Heap heap(parseSpec(specWith(R"({"range": [0, null], "mechanism": "kingsley"})")).dmm, std::size_t{1} << 30);
  void* a = heap.malloc(100);
  void* b = heap.malloc(100);
  heap.free(a);
  void* c = heap.malloc(100);
  EXPECT_EQ(c, a) << "the LIFO list of the 128-byte class hands the freed block back";
  // One 64 KiB chunk; the arena adds its 16-byte header and rounds to pages: 17 pages.
  EXPECT_EQ(heap.peakBytesHeld(), 69632u);
  // Counts, by docs/simulator.md's definition, from the code each operation runs
  // (tests/sim/access_counts_test.cpp derives KingsleyHeap's part access by access):
  //  malloc #1: a range compared 1 step; the class lookup 1 step, the bin's head read (null);
  //             ChunkHeap's cursor and limit read, a chunk requested (1 step; the arena's
  //             obtain 1 step; ArenaHeap's two header words written), the chunk list's head
  //             read and the chunk's link and the head written, cursor and limit written;
  //             SizeHeap's size word written.                  steps 4, reads 4, writes 7
  //  malloc #2: range 1, class 1; the bin's head, cursor and limit read; the cursor and the
  //             size word written.                              steps 2, reads 3, writes 2
  //  free:      the owner's byte read, 1 step; the size word read, the class lookup 1 step;
  //             the bin's head read, the object's link and the head written.
  //                                                             steps 2, reads 3, writes 2
  //  malloc #3: range 1, class 1; the head and its link read, the head written.
  //                                                             steps 2, reads 2, writes 1
  EXPECT_EQ(heap.workCounts().steps, 4u + 2 + 2 + 2);
  EXPECT_EQ(heap.workCounts().reads, 4u + 3 + 3 + 2);
  EXPECT_EQ(heap.workCounts().writes, 7u + 2 + 2 + 1);
  // A 200000-byte request: class 256 KiB plus the 16-byte size header, plus ChunkHeap's
  // 16-byte link, in a chunk of its own: 262176 + the arena's 16 = 262192 bytes -> 65 pages.
  void* big = heap.malloc(200000);
  EXPECT_EQ(heap.peakBytesHeld(), 69632u + 65 * 4096u);
  heap.free(big);
  heap.free(b);
  heap.free(c);
}

TEST(HandComputed, RegionFootprint) {
  Heap heap(parseSpec(specWith(R"({"range": [0, null], "mechanism": "region", "header": "size8",
                                  "chunk": {"bytes": 8192}})")).dmm, std::size_t{1} << 30);
  void* objects[3];
  for (void*& object : objects) object = heap.malloc(100);  // 112-byte blocks in one 8 KiB chunk
  EXPECT_EQ(heap.peakBytesHeld(), 8192u);
  // 5000 bytes (a 5008-byte block) still fits the chunk's tail: 8176 usable bytes less the
  // 40-byte chunk prefix, the 8-byte fence and 3 x 112.
  void* mid = heap.malloc(5000);
  EXPECT_EQ(heap.peakBytesHeld(), 8192u);
  // 9000 bytes (9008) does not, and is over a quarter of a chunk's 8128-byte payload: a
  // chunk of its own, 9008 + 64 bytes of chunk header, tail and fence = 9072, less the
  // arena's 16-byte header asked for, plus it again: 9072 bytes -> 3 pages.
  void* big = heap.malloc(9000);
  EXPECT_EQ(heap.peakBytesHeld(), 8192u + 12288u);
  for (void* object : objects) heap.free(object);
  heap.free(mid);
  heap.free(big);
  EXPECT_EQ(heap.bytesHeld(), 20480u) << "a region frees nothing before it is destroyed";
}

TEST(HandComputed, ExactSegregatedFitNeverReusesAcrossLengths) {
  Heap heap(parseSpec(specWith(R"({"range": [0, 1024], "mechanism": "exact_segregated_fit", "header": "size8",
                                  "chunk": {"bytes": 4096}})")).dmm, std::size_t{1} << 30);
  // A 4096-byte chunk holds blocks from offset 40 to its fence at 40 + 4032: 126 blocks of 32
  // bytes (24-byte requests) each. 200 of them take two chunks.
  void* small[200];
  for (void*& object : small) object = heap.malloc(24);
  EXPECT_EQ(heap.peakBytesHeld(), 2 * 4096u);
  for (void* object : small) heap.free(object);
  // 126 requests of 40 bytes (48-byte blocks) cannot use the freed 32-byte blocks: the second
  // chunk's tail (4032 - 74 * 32 = 1664 bytes) takes 34, a third chunk 84, a fourth the last 8.
  void* mid[126];
  for (void*& object : mid) object = heap.malloc(40);
  EXPECT_EQ(heap.peakBytesHeld(), 4 * 4096u);
  for (void* object : mid) heap.free(object);
}

TEST(HandComputed, CoalescingLetsFreedSpaceOfOneSizeServeAnother) {
  const char* design = R"({"range": [0, null], "mechanism": "segregated_fit", "class_sizes": [64, 256, 1024],
                          "header": "boundary_tags", "split": true, "coalesce": "%s",
                          "chunk": {"bytes": 32768}})";
  auto footprintOf = [&](const char* coalesce) {
    char text[512];
    std::snprintf(text, sizeof text, design, coalesce);
    Heap heap(parseSpec(specWith(text)).dmm, std::size_t{1} << 30);
    void* phase[100];
    for (void*& object : phase) object = heap.malloc(200);  // 100 x 208 = 20800 bytes
    for (void* object : phase) heap.free(object);
    for (int i = 0; i < 70; ++i) phase[i] = heap.malloc(400);  // 70 x 416 = 29120 bytes
    std::size_t peak = heap.peakBytesHeld();
    for (int i = 0; i < 70; ++i) heap.free(phase[i]);
    return peak;
  };
  // Merged back into the chunk, the first phase's space holds the second phase: one chunk.
  EXPECT_EQ(footprintOf("immediate"), 32768u);
  // Merged on demand, before the heap would grow: one chunk too.
  EXPECT_EQ(footprintOf("deferred"), 32768u);
  // Unmerged, 208-byte blocks cannot hold 416-byte ones: 29120 more bytes than the 32768 -
  // 20800 the tail has left need a second chunk.
  EXPECT_EQ(footprintOf("none"), 2 * 32768u);
}

TEST(HandComputed, TrimmingReturnsAWhollyFreeChunk) {
  Heap heap(parseSpec(specWith(R"({"range": [0, null], "mechanism": "segregated_fit", "class_sizes": [64],
                                  "split": true, "coalesce": "immediate", "trim": true,
                                  "chunk": {"bytes": 4096}})")).dmm, std::size_t{1} << 30);
  void* a = heap.malloc(1000);
  void* b = heap.malloc(1000);
  EXPECT_EQ(heap.bytesHeld(), 4096u);
  heap.free(a);
  heap.free(b);
  EXPECT_EQ(heap.bytesHeld(), 0u) << "the chunk is wholly free again and goes back";
  EXPECT_EQ(heap.peakBytesHeld(), 4096u);
}

}  // namespace
}  // namespace heapkit::sim
