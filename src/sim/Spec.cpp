#include "Spec.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string_view>

#include "Json.h"
#include "heapkit/dmm/ShortLivedSizes.h"

namespace heapkit::sim {
namespace {

using Kind = JsonValue::Kind;

constexpr std::size_t kMaxSpecBytes = std::size_t{1} << 40;  // sizes in a spec stay far from overflow
constexpr const char* kStructures[] = {"singly_linked", "doubly_linked", "size_tree"};
constexpr const char* kFits[] = {"first", "next", "best", "exact", "worst"};
constexpr const char* kOrders[] = {"lifo", "fifo", "address", "size"};
constexpr const char* kHeaders[] = {"size8", "size16", "boundary_tags"};
constexpr const char* kCoalescing[] = {"none", "immediate", "deferred"};

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw SpecError(path + ": " + what); }

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += escape;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

template <std::size_t N>
std::string choices(const char* const (&names)[N]) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i != 0) out += ", ";
    out += names[i];
  }
  return out;
}

const JsonValue& expect(const JsonValue& value, Kind kind, const std::string& path) {
  if (value.kind != kind)
    fail(path, std::string("expected ") + JsonValue::kindName(kind) + ", found " + JsonValue::kindName(value.kind));
  return value;
}

void allowOnly(const JsonValue& object, const std::string& path, std::initializer_list<std::string_view> allowed,
               const std::string& owner) {
  for (const auto& [key, value] : object.members) {
    bool known = false;
    for (std::string_view name : allowed) known = known || key == name;
    if (!known) fail(path + "." + key, "not a field of " + owner);
  }
}

std::size_t readSize(const JsonValue& value, const std::string& path, std::size_t min, std::size_t max) {
  expect(value, Kind::Number, path);
  if (!value.integral || value.negative) fail(path, "expected a whole number of bytes");
  if (value.unsignedValue < min || value.unsignedValue > max)
    fail(path, std::to_string(value.unsignedValue) + " is outside " + std::to_string(min) + ".." + std::to_string(max));
  return value.unsignedValue;
}

bool readBool(const JsonValue& value, const std::string& path) { return expect(value, Kind::Bool, path).boolean; }

template <std::size_t N>
std::size_t readChoice(const JsonValue& value, const std::string& path, const char* const (&names)[N]) {
  const std::string& text = expect(value, Kind::String, path).text;
  for (std::size_t i = 0; i < N; ++i)
    if (text == names[i]) return i;
  fail(path, quoted(text) + " is not one of " + choices(names));
}

std::size_t headerBytes(HeaderLayout header) { return header == HeaderLayout::SizeWord16 ? 16 : 8; }
std::size_t blockLength(std::size_t request, HeaderLayout header) {
  std::size_t length = (request + headerBytes(header) + 15) & ~std::size_t{15};
  return length < 32 ? 32 : length;
}

// ---- one allocator ---------------------------------------------------------------------

struct AllocatorReader {
  const JsonValue& object;
  std::string path;
  AllocatorSpec& spec;
  std::string owner;  // "a kingsley allocator", for errors

  const JsonValue* field(const char* name) const { return object.find(name); }
  std::string at(const char* name) const { return path + "." + name; }

  void readRange() {
    const JsonValue* range = field("range");
    if (range == nullptr) fail(at("range"), "missing: every allocator serves a range [min, max] of request sizes");
    expect(*range, Kind::Array, at("range"));
    if (range->items.size() != 2) fail(at("range"), "expected [min, max] (max null for no bound)");
    spec.minExclusive = readSize(range->items[0], at("range") + "[0]", 0, kMaxSpecBytes);
    if (range->items[1].kind == Kind::Null) {
      spec.maxInclusive = SIZE_MAX;
    } else {
      spec.maxInclusive = readSize(range->items[1], at("range") + "[1]", 1, kMaxSpecBytes);
      if (spec.maxInclusive <= spec.minExclusive) fail(at("range"), "max must be above min: the range is (min, max]");
    }
  }

  void readHeader(HeaderLayout fallback) {
    SegregatedFitConfig& c = spec.freeLists;
    c.header = fallback;
    if (const JsonValue* header = field("header")) c.header = HeaderLayout(readChoice(*header, at("header"), kHeaders));
  }

  void readChunk() {
    SegregatedFitConfig& c = spec.freeLists;
    const JsonValue* chunk = field("chunk");
    if (chunk == nullptr) return;
    expect(*chunk, Kind::Object, at("chunk"));
    allowOnly(*chunk, at("chunk"), {"bytes", "max_bytes", "growth"}, "a chunk policy");
    if (const JsonValue* bytes = chunk->find("bytes")) c.chunkBytes = readSize(*bytes, at("chunk") + ".bytes", 4096, std::size_t{1} << 32);
    c.maxChunkBytes = c.chunkBytes;
    if (const JsonValue* max = chunk->find("max_bytes")) c.maxChunkBytes = readSize(*max, at("chunk") + ".max_bytes", 4096, std::size_t{1} << 32);
    if (const JsonValue* growth = chunk->find("growth")) {
      expect(*growth, Kind::Number, at("chunk") + ".growth");
      // Rounded to a whole percent by truncating (x + 0.5), not std::round: libheapkit-dmm.so
      // reads specs too, and must not load libm into the programs it runs under.
      double percentPlusHalf = growth->number * 100 + 0.5;
      if (!(percentPlusHalf >= 100 && percentPlusHalf < 401)) fail(at("chunk") + ".growth", "between 1.0 (fixed chunks) and 4.0");
      c.chunkGrowthPercent = static_cast<unsigned>(percentPlusHalf);
    }
  }

  void readList(bool allowed) {
    SegregatedFitConfig& c = spec.freeLists;
    const JsonValue* list = field("list");
    if (list == nullptr) return;
    if (!allowed) fail(at("list"), "not a field of " + owner + " (its lists are fixed: singly linked, LIFO)");
    expect(*list, Kind::Object, at("list"));
    allowOnly(*list, at("list"), {"structure", "fit", "order"}, "a free-list policy");
    if (const JsonValue* v = list->find("structure")) c.structure = ListStructure(readChoice(*v, at("list") + ".structure", kStructures));
    if (const JsonValue* v = list->find("fit")) c.fit = ListFit(readChoice(*v, at("list") + ".fit", kFits));
    if (const JsonValue* v = list->find("order")) c.order = ListOrder(readChoice(*v, at("list") + ".order", kOrders));
    // A size tree is ordered by size: saying so is optional.
    if (c.structure == ListStructure::SizeTree && list->find("order") == nullptr) c.order = ListOrder::Size;
  }

  // Class bounds as block lengths: from "class_sizes" (request sizes), or N doubling
  // classes from the smallest block the range needs.
  void readClasses(bool explicitSizes, bool countAllowed, std::size_t defaultCount) {
    SegregatedFitConfig& c = spec.freeLists;
    const JsonValue* sizes = field("class_sizes");
    const JsonValue* count = field("classes");
    if (sizes != nullptr && !explicitSizes) fail(at("class_sizes"), "not a field of " + owner + " (it takes \"classes\": N)");
    if (count != nullptr && !countAllowed) fail(at("classes"), "not a field of " + owner + " (it takes \"class_sizes\")");
    if (sizes != nullptr && count != nullptr) fail(at("classes"), "give either classes or class_sizes, not both");
    if (explicitSizes && !countAllowed && sizes == nullptr) fail(at("class_sizes"), "missing: the request size each class serves");
    if (sizes != nullptr) {
      expect(*sizes, Kind::Array, at("class_sizes"));
      if (sizes->items.empty() || sizes->items.size() + 1 > SegregatedFitConfig::kMaxClasses)
        fail(at("class_sizes"), "between 1 and 255 sizes");
      std::size_t previous = 0;
      for (std::size_t i = 0; i < sizes->items.size(); ++i) {
        std::string itemPath = at("class_sizes") + "[" + std::to_string(i) + "]";
        std::size_t size = readSize(sizes->items[i], itemPath, 1, std::size_t{1} << 32);
        std::size_t length = blockLength(size, c.header);
        if (length <= previous) fail(itemPath, "class sizes must ascend by at least one 16-byte step");
        c.classBounds[i] = previous = length;
      }
      c.classCount = sizes->items.size() + 1;  // the last class takes the longer blocks
      c.classBounds[c.classCount - 1] = SIZE_MAX;
      return;
    }
    std::size_t n = count != nullptr ? readSize(*count, at("classes"), 1, SegregatedFitConfig::kMaxClasses) : defaultCount;
    std::size_t first = std::bit_ceil(blockLength(spec.minExclusive + 1, c.header));
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (first > (std::size_t{1} << 40)) fail(at("classes"), "too many doubling classes for this range");
      c.classBounds[i] = first;
      first *= 2;
    }
    c.classCount = n;
    c.classBounds[n - 1] = SIZE_MAX;
  }

  void readFreeListPolicy(bool listAllowed) {
    SegregatedFitConfig& c = spec.freeLists;
    readList(listAllowed);
    if (const JsonValue* v = field("split")) c.split = readBool(*v, at("split"));
    if (const JsonValue* v = field("coalesce")) c.coalescing = Coalescing(readChoice(*v, at("coalesce"), kCoalescing));
    if (const JsonValue* v = field("trim")) c.trim = readBool(*v, at("trim"));
    readChunk();
  }

  // page_segregated: ScalableCoreConfig's values, every one optional (libheapkit.so's).
  void readPageSegregated() {
    allowOnly(object, path,
              {"range", "mechanism", "class_sizes", "span_max_bytes", "purge_delay", "resident_free", "warm_superblocks",
               "large_cache"},
              owner);
    PageSegregatedSpec& p = spec.pageSegregated;
    PageSegregatedSpec& c = p;
    if (const JsonValue* sizes = field("class_sizes")) {
      expect(*sizes, Kind::Array, at("class_sizes"));
      if (sizes->items.size() > SizeClassTable::kMaxClasses) fail(at("class_sizes"), "at most 64 size classes");
      p.classCount = sizes->items.size();
      for (std::size_t i = 0; i < p.classCount; ++i)
        p.classBytes[i] = readSize(sizes->items[i], at("class_sizes") + "[" + std::to_string(i) + "]", 16, 32768);
      if (const char* why = SizeClassTable::check(p.classes()))
        fail(at("class_sizes"), why);
    }
    if (const JsonValue* v = field("span_max_bytes"))
      c.large.spanMaxBytes = readSize(*v, at("span_max_bytes"), 64 * 1024, std::size_t{1} << 30);
    if (const JsonValue* v = field("purge_delay")) c.segments.purgeDelay = readSize(*v, at("purge_delay"), 0, std::size_t{1} << 32);
    if (const JsonValue* resident = field("resident_free")) {
      std::string where = at("resident_free");
      expect(*resident, Kind::Object, where);
      allowOnly(*resident, where, {"min_bytes", "max_bytes", "in_use_percent", "below_peak"}, "a resident_free budget");
      if (const JsonValue* v = resident->find("min_bytes"))
        c.segments.minResidentFreeBytes = readSize(*v, where + ".min_bytes", 0, std::size_t{1} << 40);
      if (const JsonValue* v = resident->find("max_bytes"))
        c.segments.maxResidentFreeBytes = readSize(*v, where + ".max_bytes", 0, std::size_t{1} << 40);
      if (const JsonValue* v = resident->find("in_use_percent"))
        c.segments.inUsePercent = readSize(*v, where + ".in_use_percent", 0, 10000);
      if (const JsonValue* v = resident->find("below_peak")) c.segments.belowPeak = readBool(*v, where + ".below_peak");
      if (c.segments.minResidentFreeBytes > c.segments.maxResidentFreeBytes)
        fail(where + ".max_bytes", "at least min_bytes (" + std::to_string(c.segments.minResidentFreeBytes) + ")");
    }
    if (const JsonValue* v = field("warm_superblocks")) c.pool.warmSuperblocks = readSize(*v, at("warm_superblocks"), 0, 65536);
    if (const JsonValue* cache = field("large_cache")) {
      std::string where = at("large_cache");
      expect(*cache, Kind::Object, where);
      allowOnly(*cache, where, {"max_blocks", "fit_slack", "idle_operations"}, "a large_cache policy");
      if (const JsonValue* v = cache->find("max_blocks")) c.cache.maxObjects = readSize(*v, where + ".max_blocks", 0, 1024);
      if (const JsonValue* v = cache->find("fit_slack")) c.cache.fitSlack = readSize(*v, where + ".fit_slack", 1, 1 << 20);
      if (const JsonValue* v = cache->find("idle_operations"))
        c.cache.idleOperations = readSize(*v, where + ".idle_operations", 1, std::size_t{1} << 40);
    }
  }

  std::string pageSegregatedText() const {
    const PageSegregatedSpec& p = spec.pageSegregated;
    const PageSegregatedSpec& c = p;
    std::string out = ",\"class_sizes\":[";
    for (std::size_t i = 0; i < p.classCount; ++i) {
      if (i != 0) out += ',';
      out += std::to_string(p.classBytes[i]);
    }
    return out + "],\"span_max_bytes\":" + std::to_string(c.large.spanMaxBytes) +
           ",\"purge_delay\":" + std::to_string(c.segments.purgeDelay) +
           ",\"resident_free\":{\"min_bytes\":" + std::to_string(c.segments.minResidentFreeBytes) +
           ",\"max_bytes\":" + std::to_string(c.segments.maxResidentFreeBytes) +
           ",\"in_use_percent\":" + std::to_string(c.segments.inUsePercent) +
           // Written only when set, so that the designs without it keep their keys.
           (c.segments.belowPeak ? ",\"below_peak\":true" : "") +
           "},\"warm_superblocks\":" + std::to_string(c.pool.warmSuperblocks) +
           ",\"large_cache\":{\"max_blocks\":" + std::to_string(c.cache.maxObjects) +
           ",\"fit_slack\":" + std::to_string(c.cache.fitSlack) +
           ",\"idle_operations\":" + std::to_string(c.cache.idleOperations) + "}";
  }

  void read() {
    SegregatedFitConfig& c = spec.freeLists;
    switch (spec.mechanism) {
      case Mechanism::PageSegregated: readPageSegregated(); break;
      case Mechanism::Kingsley:
      case Mechanism::Lea:
      case Mechanism::AdaptiveLea:
        allowOnly(object, path, {"range", "mechanism"}, owner + " (it is heapkit's own, fixed)");
        break;
      case Mechanism::Region:
        allowOnly(object, path, {"range", "mechanism", "header", "chunk"}, owner);
        readHeader(HeaderLayout::SizeWord8);
        c.region = true;
        c.structure = ListStructure::SinglyLinked;
        readChunk();
        break;
      case Mechanism::BinaryBuddy:
      case Mechanism::FibonacciBuddy:
      case Mechanism::WeightedBuddy:
      case Mechanism::DoubleBuddy: {
        allowOnly(object, path, {"range", "mechanism", "min_block_bytes", "area_bytes", "coalesce", "trim"}, owner);
        BuddyConfig& b = spec.buddy;
        b.kind = spec.mechanism == Mechanism::BinaryBuddy      ? BuddyKind::Binary
                 : spec.mechanism == Mechanism::FibonacciBuddy ? BuddyKind::Fibonacci
                 : spec.mechanism == Mechanism::WeightedBuddy  ? BuddyKind::Weighted
                                                               : BuddyKind::Double;
        b.trim = false;
        if (const JsonValue* v = field("min_block_bytes")) b.minBlockBytes = readSize(*v, at("min_block_bytes"), 32, 1 << 20);
        if (b.minBlockBytes % 16 != 0) fail(at("min_block_bytes"), "a multiple of 16");
        if (const JsonValue* v = field("area_bytes")) b.areaBytes = readSize(*v, at("area_bytes"), 4096, std::size_t{1} << 32);
        if (b.areaBytes < 4 * b.minBlockBytes) fail(at("area_bytes"), "at least four of the smallest blocks");
        if (const JsonValue* v = field("coalesce")) {
          std::size_t mode = readChoice(*v, at("coalesce"), kCoalescing);
          if (mode == std::size_t(Coalescing::Deferred)) fail(at("coalesce"), "buddy systems merge immediately or not at all");
          b.coalesce = mode == std::size_t(Coalescing::Immediate);
        }
        if (const JsonValue* v = field("trim")) b.trim = readBool(*v, at("trim"));
        break;
      }
      default: {
        bool lists = spec.mechanism != Mechanism::SimpleSegregatedStorage;
        bool classed = spec.mechanism != Mechanism::ExactSegregatedFit;
        std::initializer_list<std::string_view> common = {"range", "mechanism", "header", "list", "split", "coalesce",
                                                          "trim", "chunk", "classes", "class_sizes"};
        allowOnly(object, path, common, owner);
        if (!classed && (field("classes") || field("class_sizes")))
          fail(at(field("classes") ? "classes" : "class_sizes"), "not a field of " + owner + " (one class per length)");
        bool fitFamily = spec.mechanism == Mechanism::SegregatedLists || spec.mechanism == Mechanism::SegregatedFit;
        readHeader(fitFamily ? HeaderLayout::BoundaryTags : HeaderLayout::SizeWord8);
        if (fitFamily) {
          c.split = true;
          c.coalescing = Coalescing::Immediate;
        }
        if (spec.mechanism == Mechanism::SimpleSegregatedStorage) {
          c.structure = ListStructure::SinglyLinked;
          c.perClassChunks = true;
        }
        if (spec.mechanism == Mechanism::ExactSegregatedFit) c.fit = ListFit::Exact;
        readFreeListPolicy(lists);
        switch (spec.mechanism) {
          case Mechanism::SegregatedLists: readClasses(false, true, 8); break;
          case Mechanism::SegregatedFit: readClasses(true, false, 0); break;
          case Mechanism::StrictSegregatedFit:
          case Mechanism::SimpleSegregatedStorage: readClasses(true, true, 8); break;
          default: break;
        }
        c.classes = spec.mechanism == Mechanism::ExactSegregatedFit ? SizeClasses::Exact
                    : (spec.mechanism == Mechanism::StrictSegregatedFit || spec.mechanism == Mechanism::SimpleSegregatedStorage)
                        ? SizeClasses::Strict
                        : SizeClasses::Ranges;
        c.searchLargerClasses = c.classes == SizeClasses::Ranges;
        if (c.classes == SizeClasses::Exact) {
          if (spec.maxInclusive > (std::size_t{1} << 20))
            fail(at("range"), "exact segregated fit keeps a list per length: its range must end at 1 MiB or below");
          c.exactMaxBytes = blockLength(spec.maxInclusive, c.header);
          c.classCount = 1;
        }
        if (const char* why = invalidSegregatedFit(c)) {
          std::string reason = why;
          std::size_t colon = reason.find(": ");
          fail(path + "." + reason.substr(0, colon), reason.substr(colon + 2));
        }
      }
    }
  }

  // ---- normalised text ----

  std::string normalized() const {
    const SegregatedFitConfig& c = spec.freeLists;
    std::string out = "{\"range\":[" + std::to_string(spec.minExclusive) + "," +
                      (spec.maxInclusive == SIZE_MAX ? std::string("null") : std::to_string(spec.maxInclusive)) +
                      "],\"mechanism\":\"" + kMechanismNames[std::size_t(spec.mechanism)] + "\"";
    switch (spec.mechanism) {
      case Mechanism::Kingsley:
      case Mechanism::Lea:
      case Mechanism::AdaptiveLea: break;
      case Mechanism::PageSegregated: out += pageSegregatedText(); break;
      case Mechanism::Region:
        out += ",\"header\":\"" + std::string(kHeaders[std::size_t(c.header)]) + "\"" + chunkText();
        break;
      case Mechanism::BinaryBuddy:
      case Mechanism::FibonacciBuddy:
      case Mechanism::WeightedBuddy:
      case Mechanism::DoubleBuddy:
        out += ",\"min_block_bytes\":" + std::to_string(spec.buddy.minBlockBytes) +
               ",\"area_bytes\":" + std::to_string(spec.buddy.areaBytes) + ",\"coalesce\":\"" +
               (spec.buddy.coalesce ? "immediate" : "none") + "\",\"trim\":" + (spec.buddy.trim ? "true" : "false");
        break;
      default: {
        if (spec.mechanism == Mechanism::SegregatedLists) {
          out += ",\"classes\":" + std::to_string(c.classCount);
        } else if (c.classes != SizeClasses::Exact) {
          out += ",\"class_sizes\":[";
          for (std::size_t i = 0; i + 1 < c.classCount; ++i) {
            if (i != 0) out += ',';
            out += std::to_string(c.classBounds[i] - headerBytes(c.header));
          }
          out += "]";
        }
        out += ",\"header\":\"" + std::string(kHeaders[std::size_t(c.header)]) + "\"";
        if (spec.mechanism != Mechanism::SimpleSegregatedStorage)
          out += ",\"list\":{\"structure\":\"" + std::string(kStructures[std::size_t(c.structure)]) + "\",\"fit\":\"" +
                 kFits[std::size_t(c.fit)] + "\",\"order\":\"" + kOrders[std::size_t(c.order)] + "\"}";
        out += std::string(",\"split\":") + (c.split ? "true" : "false") + ",\"coalesce\":\"" +
               kCoalescing[std::size_t(c.coalescing)] + "\",\"trim\":" + (c.trim ? "true" : "false") + chunkText();
      }
    }
    return out + "}";
  }

  std::string chunkText() const {
    const SegregatedFitConfig& c = spec.freeLists;
    char growth[32];
    std::snprintf(growth, sizeof growth, "%g", c.chunkGrowthPercent / 100.0);
    return ",\"chunk\":{\"bytes\":" + std::to_string(c.chunkBytes) + ",\"max_bytes\":" + std::to_string(c.maxChunkBytes) +
           ",\"growth\":" + growth + "}";
  }
};

// Placement by lifetime: {"sizes": [[min, max], ...], "allocator": {...}}, the sizes
// ascending 16-byte ranges up to 64 KiB, the allocator any mechanism without a range.
// Returns its normalised text.
std::string readShortLived(const JsonValue& value, DmmSpec& dmm) {
  const std::string path = "short_lived";
  expect(value, Kind::Object, path);
  allowOnly(value, path, {"sizes", "allocator"}, "a short-lived area");
  const JsonValue* sizes = value.find("sizes");
  if (sizes == nullptr) fail(path + ".sizes", "missing: the request sizes, as ranges [min, max], that go to the short-lived area");
  expect(*sizes, Kind::Array, path + ".sizes");
  if (sizes->items.empty()) fail(path + ".sizes", "at least one range [min, max]");
  ShortLivedSizes& set = dmm.shortLived.sizes;
  std::string sizesText = "[";
  for (std::size_t i = 0; i < sizes->items.size(); ++i) {
    std::string at = path + ".sizes[" + std::to_string(i) + "]";
    const JsonValue& range = expect(sizes->items[i], Kind::Array, at);
    if (range.items.size() != 2) fail(at, "expected [min, max]");
    std::size_t min = readSize(range.items[0], at + "[0]", 0, ShortLivedSizes::kMaxBytes);
    std::size_t max = readSize(range.items[1], at + "[1]", 0, ShortLivedSizes::kMaxBytes);
    if (const char* why = set.refuses(min, max)) fail(at, why);
    set.add(min, max);
    sizesText += (i == 0 ? "[" : ",[") + std::to_string(min) + "," + std::to_string(max) + "]";
  }
  sizesText += "]";
  const JsonValue* allocator = value.find("allocator");
  if (allocator == nullptr) fail(path + ".allocator", "missing: the allocator of the short-lived area");
  std::string where = path + ".allocator";
  const JsonValue& object = expect(*allocator, Kind::Object, where);
  if (object.find("range") != nullptr) fail(where + ".range", "the short-lived area takes its sizes, not a range");
  AllocatorSpec& spec = dmm.shortLived.allocator;
  const JsonValue* mechanism = object.find("mechanism");
  if (mechanism == nullptr) fail(where + ".mechanism", "missing: one of " + choices(kMechanismNames));
  spec.mechanism = Mechanism(readChoice(*mechanism, where + ".mechanism", kMechanismNames));
  spec.minExclusive = 0;
  spec.maxInclusive = ShortLivedSizes::kMaxBytes;  // no request above it reaches the area
  AllocatorReader reader{object, where, spec, std::string("a ") + kMechanismNames[std::size_t(spec.mechanism)] + " allocator"};
  reader.read();
  std::string text = reader.normalized();
  std::size_t mechanismAt = text.find("\"mechanism\"");
  dmm.hasShortLived = true;
  return "{\"sizes\":" + sizesText + ",\"allocator\":{" + text.substr(mechanismAt) + "}";
}

}  // namespace

ParsedSpec parseSpec(const std::string& jsonText) {
  JsonValue root;
  try {
    root = parseJson(jsonText);
  } catch (const JsonError& error) {
    throw SpecError(std::string("not valid JSON: ") + error.what());
  }
  ParsedSpec parsed;
  expect(root, Kind::Object, "spec");
  allowOnly(root, "spec", {"format", "name", "description", "allocators", "fallback", "short_lived"}, "a DMM spec");
  const JsonValue* format = root.find("format");
  if (format == nullptr) fail("format", std::string("missing: a spec starts with \"format\": \"") + kSpecFormat + "\"");
  if (expect(*format, Kind::String, "format").text != kSpecFormat)
    fail("format", quoted(format->text) + " is not a format this heapkit reads (" + kSpecFormat + ")");
  if (const JsonValue* name = root.find("name")) parsed.name = expect(*name, Kind::String, "name").text;
  if (const JsonValue* text = root.find("description")) parsed.description = expect(*text, Kind::String, "description").text;

  const JsonValue* allocators = root.find("allocators");
  if (allocators == nullptr) fail("allocators", "missing: a DMM has at least one allocator");
  expect(*allocators, Kind::Array, "allocators");
  if (allocators->items.empty() || allocators->items.size() > DmmSpec::kMaxAllocators)
    fail("allocators", "between 1 and " + std::to_string(DmmSpec::kMaxAllocators) + " allocators");
  DmmSpec& dmm = parsed.dmm;
  dmm.count = allocators->items.size();
  std::string normalizedAllocators;
  for (std::size_t i = 0; i < dmm.count; ++i) {
    std::string path = "allocators[" + std::to_string(i) + "]";
    const JsonValue& object = expect(allocators->items[i], Kind::Object, path);
    AllocatorSpec& spec = dmm.allocators[i];
    const JsonValue* mechanism = object.find("mechanism");
    if (mechanism == nullptr) fail(path + ".mechanism", "missing: one of " + choices(kMechanismNames));
    spec.mechanism = Mechanism(readChoice(*mechanism, path + ".mechanism", kMechanismNames));
    AllocatorReader reader{object, path, spec, std::string("a ") + kMechanismNames[std::size_t(spec.mechanism)] + " allocator"};
    reader.readRange();
    std::size_t expectedMin = i == 0 ? 0 : dmm.allocators[i - 1].maxInclusive;
    if (spec.minExclusive != expectedMin) {
      if (i == 0) fail(path + ".range[0]", "the first allocator's range starts at 0");
      if (expectedMin == SIZE_MAX) fail(path + ".range", "the previous allocator already takes every larger size");
      fail(path + ".range[0]", std::string(spec.minExclusive < expectedMin ? "overlaps" : "leaves a gap after") +
                                   " the previous allocator's range, which ends at " + std::to_string(expectedMin));
    }
    reader.read();
    if (i != 0) normalizedAllocators += ',';
    normalizedAllocators += reader.normalized();
  }

  std::string fallbackText = "\"os\"";
  if (const JsonValue* fallback = root.find("fallback")) {
    if (fallback->kind == Kind::String) {
      if (fallback->text != "os") fail("fallback", quoted(fallback->text) + " is not \"os\" or an allocator's index");
    } else {
      std::size_t index = readSize(*fallback, "fallback", 0, dmm.count - 1);
      Mechanism m = dmm.allocators[index].mechanism;
      if (m == Mechanism::ExactSegregatedFit)
        fail("fallback", std::string("a ") + kMechanismNames[std::size_t(m)] + " allocator cannot take requests of any size");
      dmm.fallback = static_cast<int>(index);
      fallbackText = std::to_string(index);
    }
  }
  if (dmm.allocators[dmm.count - 1].maxInclusive == SIZE_MAX && root.find("fallback") != nullptr &&
      dmm.fallback != DmmSpec::kFallbackToOs)
    fail("fallback", "the last allocator's range has no bound: nothing is left to fall back");

  std::string shortLivedText;
  if (const JsonValue* shortLived = root.find("short_lived")) shortLivedText = ",\"short_lived\":" + readShortLived(*shortLived, dmm);

  // The design only: a name or description does not make another design.
  parsed.normalized = "{\"format\":\"" + std::string(kSpecFormat) + "\",\"allocators\":[" + normalizedAllocators +
                      "],\"fallback\":" + fallbackText + shortLivedText + "}";
  return parsed;
}

ParsedSpec loadSpec(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) throw SpecError(path + ": " + std::strerror(errno));
  std::string text;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) {
    text.append(buffer, n);
    if (text.size() > (std::size_t{1} << 20)) {
      std::fclose(file);
      throw SpecError(path + ": larger than 1 MiB, not a DMM spec");
    }
  }
  bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) throw SpecError(path + ": read error");
  try {
    return parseSpec(text);
  } catch (const SpecError& error) {
    throw SpecError(path + ": " + error.what());
  }
}

}  // namespace heapkit::sim
