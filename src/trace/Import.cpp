// Importers and exporters for the text, mtrace and heaptrack logs (heapkit/trace/Convert.h).
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "heapkit/trace/Convert.h"

namespace heapkit::trace {

bool parseLogFormat(std::string_view name, LogFormat& format) {
  if (name == "text") format = LogFormat::Text;
  else if (name == "mtrace") format = LogFormat::Mtrace;
  else if (name == "heaptrack") format = LogFormat::Heaptrack;
  else return false;
  return true;
}

namespace {

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

bool parseNumber(std::string_view token, int base, std::uint64_t& value) {
  if (base == 16 && token.size() > 2 && token[0] == '0' && (token[1] == 'x' || token[1] == 'X')) token.remove_prefix(2);
  if (token.empty()) return false;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value, base);
  return ec == std::errc() && end == token.data() + token.size();
}

// An address as printed by %p: "0x..." or "(nil)".
bool parseAddress(std::string_view token, std::uint64_t& value) {
  if (token == "(nil)") {
    value = 0;
    return true;
  }
  return parseNumber(token, 16, value);
}

// Heaptrack's interpreted data file names code by index into tables it builds as it goes:
// strings ("s"), instruction pointers ("i", with a module and function string), backtraces
// ("t", an instruction pointer and the parent backtrace) and allocation sites ("a", a size
// and a backtrace); "+ n" and "- n" allocate and free at site n. heapkit's export puts
// its own frames under this module name, so that the import can read them back.
constexpr std::string_view kHeaptrackModule = "heapkit-trace";
constexpr std::string_view kHeaptrackThreadComment = "# heapkit thread ";  // "<index> tid <os tid>"

// The frame an exported allocation gets, by kind: what heaptrack_print shows as its caller.
std::string heaptrackFrameName(Op op, std::uint64_t alignment) {
  switch (op) {
    case Op::Calloc: return "calloc";
    case Op::Realloc: return "realloc";
    case Op::Aligned: return "aligned_alloc [alignment " + std::to_string(alignment) + "]";
    default: return "malloc";
  }
}

Op heaptrackFrameOp(std::string_view name, std::uint64_t& alignment) {
  if (name == "calloc") return Op::Calloc;
  if (name == "realloc") return Op::Realloc;
  constexpr std::string_view aligned = "aligned_alloc [alignment ";
  if (name.starts_with(aligned) && name.ends_with("]")) {
    std::string_view digits = name.substr(aligned.size(), name.size() - aligned.size() - 1);
    if (parseNumber(digits, 10, alignment) && alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= (1ull << 40))
      return Op::Aligned;
  }
  return Op::Malloc;
}

}  // namespace

struct LogImporter::Impl {
  LogFormat format;
  TraceWriter writer;
  bool lenient;
  OpenAddressingMap<std::uint64_t> live;  // address -> object id
  ImportSummary summary;
  std::string pending;  // a line split across feeds
  std::uint64_t lineStart = 0;  // byte offset of the line being parsed
  std::uint64_t consumed = 0;
  std::uint64_t time = 0;       // text: the line's time; heaptrack: the latest "c" line, in ns
  bool reallocPending = false;  // mtrace: a "<" waits for its ">"
  bool reallocKnown = false;
  std::uint64_t reallocOld = 0;

  // Heaptrack: which of its two files this is, decided by the first line only one has.
  enum class HeaptrackFile { Unknown, Raw, Interpreted } heaptrackFile = HeaptrackFile::Unknown;
  std::uint64_t heaptrackVersion = 3;  // the file format version from the "v" line
  bool heaptrackVersionSeen = false;
  struct Ip {
    std::uint64_t module, function;
  };
  struct Backtrace {
    std::uint64_t ip, parent;
  };
  struct Site {
    std::uint64_t size, backtrace;
  };
  std::vector<std::string> strings{""};        // index 0: none
  std::vector<Ip> ips{Ip{0, 0}};               // from 1
  std::vector<Backtrace> backtraces{Backtrace{0, 0}};  // from 1; 0 is the empty backtrace
  std::vector<Site> sites;                      // from 0
  std::vector<std::vector<std::uint64_t>> liveAtSite;  // ids of live objects, latest last
  std::uint32_t thread = 0;                     // from heapkit's own thread comments
  // A free waits for the next line: if that allocates in a "realloc" frame, the two are one realloc.
  bool freePending = false;
  std::uint64_t pendingId = 0, pendingTime = 0;
  std::uint32_t pendingThread = 0;

  Impl(LogFormat f, std::FILE* out, bool l) : format(f), writer(out), lenient(l) {}

  [[noreturn]] void error(const std::string& message) const {
    throw std::runtime_error("line " + std::to_string(summary.lines) + " (offset " + std::to_string(lineStart) +
                             "): " + message);
  }

  // Text lines carry their own time; heaptrack a clock now and then; mtrace none, so its
  // time is the event number, which keeps order and distances.
  std::uint64_t now() const { return format == LogFormat::Mtrace ? summary.events : time; }

  // What a trace may hold (kMaxObjectBytes): a larger size in a log is corruption.
  void checkSize(std::uint64_t size) const {
    if (size > kMaxObjectBytes)
      error("size " + std::to_string(size) + " is larger than any allocation can be (at most " +
            std::to_string(kMaxObjectBytes) + ")");
  }

  void allocate(std::uint64_t address, std::uint64_t size, Op op = Op::Malloc, bool haveOld = false, std::uint64_t oldId = 0) {
    if (address == 0) {
      ++summary.failedAllocations;
      return;
    }
    checkSize(size);
    std::uint64_t previous = 0;
    if (live.contains(address)) {
      if (!lenient) error("allocation at 0x" + hex(address) + ", which is still live (use --lenient to end it there)");
      live.erase(address, previous);
      writer.free(0, now(), previous);
      ++summary.reusedAddresses;
      ++summary.events;
    }
    std::uint64_t id = 0;
    if (op == Op::Realloc && haveOld) id = writer.realloc(0, now(), oldId, size);
    else if (op == Op::Calloc) id = writer.calloc(0, now(), size);
    else id = writer.malloc(0, now(), size);
    live.insert(address, id);
    ++summary.events;
  }

  // Ends the object at `address`; false if it is unknown (an error unless lenient).
  bool release(std::uint64_t address, std::uint64_t& id) {
    if (live.erase(address, id)) return true;
    if (!lenient) error("free of unknown address 0x" + hex(address) + " (use --lenient to skip such frees)");
    ++summary.unknownFrees;
    return false;
  }

  void freeAddress(std::uint64_t address) {
    if (address == 0) return;  // free(NULL) is no operation
    std::uint64_t id = 0;
    if (release(address, id)) {
      writer.free(0, now(), id);
      ++summary.events;
    }
  }

  static std::string hex(std::uint64_t v) {
    char buffer[24];
    std::snprintf(buffer, sizeof buffer, "%" PRIx64, v);
    return buffer;
  }

  // A log's times may not go backwards (a trace's times never do); --lenient keeps the
  // latest time instead, for logs merged from clocks that disagree a little.
  void advanceTime(std::uint64_t stamp) {
    if (stamp < time && !lenient)
      error("time " + std::to_string(stamp) + " is before the previous line's " + std::to_string(time) +
            " (use --lenient to keep the later time)");
    time = std::max(time, stamp);
  }

  void parseText(const std::vector<std::string_view>& t) {
    if (t.empty() || t[0][0] == '#') return;
    std::uint64_t stamp, address, size;
    if (t.size() < 3 || !parseNumber(t[0], 10, stamp)) error("expected '<time> new <address> <size>' or '<time> delete <address>'");
    if (!parseAddress(t[2], address)) error("bad address '" + std::string(t[2]) + "'");
    if (t[1] == "new") {
      if (t.size() != 4 || !parseNumber(t[3], 10, size)) error("expected '<time> new <address> <size>'");
      advanceTime(stamp);
      allocate(address, size);
    } else if (t[1] == "delete") {
      if (t.size() != 3) error("expected '<time> delete <address>'");
      advanceTime(stamp);
      freeAddress(address);
    } else {
      error("unknown operation '" + std::string(t[1]) + "' (expected new or delete)");
    }
  }

  void parseMtrace(const std::vector<std::string_view>& t) {
    if (t.empty() || t[0] == "=") return;  // "= Start", "= End"
    if (t[0] != "@") error("expected a line starting with '@' or '='");
    // "@ caller OP ..." where the caller may be "[0x...]" or "prog:(sym+0x1)[0x...]".
    std::size_t k = 1;
    while (k < t.size() && t[k] != "+" && t[k] != "-" && t[k] != "<" && t[k] != ">" && t[k] != "!") ++k;
    if (k == t.size()) error("no operation (+, -, <, >, !) on the line");
    std::string_view op = t[k];
    std::uint64_t address = 0, size = 0;
    if (k + 1 >= t.size() || !parseAddress(t[k + 1], address)) error("bad or missing address");
    bool hasSize = (op == "+" || op == ">" || op == "!");
    if (hasSize && (k + 2 >= t.size() || !parseNumber(t[k + 2], 16, size))) error("bad or missing size");
    if (op != "<" && op != ">" && reallocPending) error("'<' of a realloc is not followed by its '>'");
    if (op == "+") {
      allocate(address, size);
    } else if (op == "-") {
      freeAddress(address);
    } else if (op == "<") {
      if (reallocPending) error("two '<' lines in a row");
      reallocPending = true;
      reallocKnown = release(address, reallocOld);
    } else if (op == ">") {
      if (!reallocPending) error("'>' without the '<' line of its realloc");
      reallocPending = false;
      allocate(address, size, Op::Realloc, reallocKnown, reallocOld);
    } else {  // "!": a failed realloc leaves the old object as it was
      ++summary.failedAllocations;
    }
  }

  void decideHeaptrackFile(HeaptrackFile file, std::string_view kind) {
    if (heaptrackFile == HeaptrackFile::Unknown) heaptrackFile = file;
    else if (heaptrackFile != file)
      error("a line of heaptrack's " + std::string(file == HeaptrackFile::Raw ? "raw" : "interpreted") + " file ('" +
            std::string(kind) + "') in its " + (file == HeaptrackFile::Raw ? "interpreted" : "raw") + " file");
  }

  void flushPendingFree() {
    if (!freePending) return;
    freePending = false;
    writer.free(pendingThread, pendingTime, pendingId);
  }

  std::uint64_t index(std::string_view token, std::uint64_t limit, const char* what) {
    std::uint64_t value;
    if (!parseNumber(token, 16, value)) error(std::string("bad ") + what + " index '" + std::string(token) + "'");
    if (value >= limit) error(std::string(what) + " " + hex(value) + " is not defined yet (" + std::to_string(limit) + " so far)");
    return value;
  }

  // The interpreted file (what heaptrack_print reads): tables, then "+ site" and "- site".
  void parseInterpreted(std::string_view text, const std::vector<std::string_view>& t) {
    const std::string_view kind = t[0];
    if (kind == "s") {
      // "s <length> <bytes>" (file format 3; before that, no length): the bytes may hold spaces.
      if (t.size() < 2) error("expected 's <length> <string>'");
      std::string_view rest = text.substr(text.find('s') + 1);
      rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of(' ')));
      if (heaptrackVersion >= 3) {
        std::uint64_t length;
        std::size_t space = rest.find(' ');
        if (!parseNumber(rest.substr(0, space), 16, length)) error("expected 's <length> <string>'");
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
        if (rest.size() != length) error("string of " + std::to_string(rest.size()) + " bytes where its line says " + std::to_string(length));
      }
      strings.emplace_back(rest);
    } else if (kind == "i") {
      // "i <ip> <module> [<function> <file> <line>]...": the first frame's function names it.
      if (t.size() < 3) error("expected 'i <ip> <module> [<function> ...]'");
      std::uint64_t module = index(t[2], strings.size(), "string");
      std::uint64_t function = t.size() > 3 ? index(t[3], strings.size(), "string") : 0;
      ips.push_back({module, function});
    } else if (kind == "t") {
      if (t.size() != 3) error("expected 't <ip> <parent>'");
      std::uint64_t ip = index(t[1], ips.size(), "instruction pointer");
      backtraces.push_back({ip, index(t[2], backtraces.size(), "backtrace")});
    } else if (kind == "a") {
      std::uint64_t size;
      if (t.size() != 3 || !parseNumber(t[1], 16, size)) error("expected 'a <size> <backtrace>'");
      checkSize(size);
      sites.push_back({size, index(t[2], backtraces.size(), "backtrace")});
      liveAtSite.emplace_back();
    } else if (kind == "+") {
      if (t.size() != 2) error("expected '+ <allocation site>'");
      std::uint64_t site = index(t[1], sites.size(), "allocation site");
      std::uint64_t alignment = 0;
      Op op = Op::Malloc;
      const Backtrace& bt = backtraces[sites[site].backtrace];
      if (sites[site].backtrace != 0 && strings[ips[bt.ip].module] == kHeaptrackModule)
        op = heaptrackFrameOp(strings[ips[bt.ip].function], alignment);
      std::uint64_t size = sites[site].size, id;
      if (op == Op::Realloc && freePending) {  // the free before it was this realloc's end of the old object
        freePending = false;
        id = writer.realloc(thread, now(), pendingId, size);
      } else {
        flushPendingFree();
        if (op == Op::Calloc) id = writer.calloc(thread, now(), size);
        else if (op == Op::Aligned) id = writer.aligned(thread, now(), alignment, size);
        else id = writer.malloc(thread, now(), size);
        ++summary.events;
      }
      liveAtSite[site].push_back(id);
    } else if (kind == "-") {
      // Frees name a site, not an object: the site's latest live object ends (for a file
      // heapkit exported, its only one).
      if (t.size() != 2) error("expected '- <allocation site>'");
      std::uint64_t site = index(t[1], sites.size(), "allocation site");
      flushPendingFree();
      if (liveAtSite[site].empty()) {
        if (!lenient) error("free at allocation site " + hex(site) + ", which has no live allocation (use --lenient to skip such frees)");
        ++summary.unknownFrees;
        return;
      }
      freePending = true;
      pendingId = liveAtSite[site].back();
      pendingTime = now();
      pendingThread = thread;
      liveAtSite[site].pop_back();
      ++summary.events;
    } else if (kind == "#") {
      if (text.starts_with(kHeaptrackThreadComment)) {
        auto words = split(text.substr(kHeaptrackThreadComment.size()));
        std::uint64_t index, tid;
        if (words.size() != 3 || words[1] != "tid" || !parseNumber(words[0], 10, index) || !parseNumber(words[2], 10, tid))
          error("expected '" + std::string(kHeaptrackThreadComment) + "<index> tid <os thread id>'");
        if (index > TraceWriter::kMaxThreadNumber)
          error("thread index " + std::to_string(index) + " is too large (at most " +
                std::to_string(TraceWriter::kMaxThreadNumber) + ")");
        flushPendingFree();
        thread = static_cast<std::uint32_t>(index);
        writer.setOsTid(thread, tid);
      }
    }
    // Other lines (command line, page size, RSS, attach, suppressions) carry no operation.
  }

  void parseHeaptrack(std::string_view text, const std::vector<std::string_view>& t) {
    if (t.empty()) return;
    std::uint64_t value, address;
    // Every heaptrack file, raw or interpreted, begins with its version line: without one,
    // a file of other lines would pass as a heaptrack file with no operations.
    if (!heaptrackVersionSeen && t[0] != "v")
      error("not a heaptrack file: it must begin with the version line 'v <heaptrack version> <file version>'");
    if (t[0] == "v") {
      heaptrackVersionSeen = true;
      if (summary.events == 0 && t.size() >= 3 && parseNumber(t[2], 16, value)) {
        if (value < 2) error("heaptrack file version " + std::to_string(value) + " is too old (need 2 or later)");
        heaptrackVersion = value;
      }
      return;
    }
    if (t[0] == "c") {
      // Elapsed milliseconds since start, written now and then.
      if (t.size() != 2 || !parseNumber(t[1], 16, value)) error("expected 'c <elapsed ms>'");
      if (value > UINT64_MAX / 1000000) error("time overflows 64 bits");
      if (value * 1000000 > time) time = value * 1000000;
      return;
    }
    if (t[0] == "a" || t[0] == "s" || t[0] == "i") decideHeaptrackFile(HeaptrackFile::Interpreted, t[0]);
    else if (t[0] == "m" || t[0] == "x") decideHeaptrackFile(HeaptrackFile::Raw, t[0]);
    else if (t[0] == "+" && heaptrackFile == HeaptrackFile::Unknown)  // "+ site" or "+ size backtrace address"
      decideHeaptrackFile(t.size() == 2 ? HeaptrackFile::Interpreted : HeaptrackFile::Raw, t[0]);
    if (heaptrackFile == HeaptrackFile::Interpreted) {
      parseInterpreted(text, t);
      return;
    }
    if (t[0] == "+") {
      // "+ size trace-index address", all hex
      if (t.size() != 4 || !parseNumber(t[1], 16, value) || !parseNumber(t[3], 16, address))
        error("expected '+ <size> <trace> <address>'");
      allocate(address, value);
    } else if (t[0] == "-") {
      if (t.size() != 2 || !parseNumber(t[1], 16, address)) error("expected '- <address>'");
      freeAddress(address);
    }
    // Other lines (modules, traces, instruction pointers, RSS, ...) carry no operation.
  }

  void line(std::string_view text) {
    ++summary.lines;
    auto tokens = split(text);
    switch (format) {
      case LogFormat::Text: parseText(tokens); break;
      case LogFormat::Mtrace: parseMtrace(tokens); break;
      case LogFormat::Heaptrack: parseHeaptrack(text, tokens); break;
    }
  }
};

LogImporter::LogImporter(LogFormat format, std::FILE* out, bool lenient, Header header)
    : impl_(std::make_unique<Impl>(format, out, lenient)) {
  impl_->writer.begin(header);
}

LogImporter::~LogImporter() = default;

void LogImporter::feed(std::string_view bytes) {
  Impl& m = *impl_;
  while (!bytes.empty()) {
    std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      m.pending.append(bytes);
      m.consumed += bytes.size();
      return;
    }
    std::string_view text = bytes.substr(0, nl);
    if (!m.pending.empty()) {
      m.pending.append(text);
      text = m.pending;
    }
    m.line(text);
    m.consumed += nl + 1;
    m.lineStart = m.consumed;
    m.pending.clear();
    bytes.remove_prefix(nl + 1);
  }
}

ImportSummary LogImporter::finish() {
  Impl& m = *impl_;
  if (!m.pending.empty()) {
    std::string last = std::move(m.pending);
    m.pending.clear();
    m.line(last);
  }
  if (m.reallocPending) m.error("the log ends inside a realloc ('<' without '>')");
  m.flushPendingFree();
  m.writer.end();
  m.summary.objects = m.writer.objects();
  m.summary.bytesWritten = m.writer.bytesWritten();
  return m.summary;
}

// ---------------------------------------------------------------------------------------

// Heaptrack's interpreted file frees an allocation site (size and backtrace), not an
// object. So that a free names exactly one object, every live object gets a slot (a small
// number, reused once the object is freed) and a backtrace of its own for that slot: its
// kind's frame (malloc, calloc, realloc, aligned_alloc [alignment N]), all in module
// heapkit-trace. heaptrack_print merges backtraces by frame, so it shows one caller per
// kind; the slots cost one backtrace per object live at the peak. Threads, which heaptrack
// does not record, go into comments ("# heapkit thread 1 tid 4242") that it skips; times
// become its "c" lines, in milliseconds.
struct LogExporter::Heaptrack {
  struct SiteKey {
    std::uint64_t size, backtrace;
    bool operator==(const SiteKey&) const = default;
  };
  struct SiteHash {
    std::size_t operator()(const SiteKey& k) const { return std::hash<std::uint64_t>()(k.size * 0x9E3779B97F4A7C15ull ^ k.backtrace); }
  };

  std::FILE* out;
  std::uint64_t strings = 0, ips = 0, backtraces = 0, sites = 0;
  std::unordered_map<std::string, std::size_t> frameNamed;  // -> index in frameIp and backtraceAt
  std::vector<std::uint64_t> frameIp;
  std::vector<std::vector<std::uint64_t>> backtraceAt;  // [frame][slot], 0 until written
  std::unordered_map<SiteKey, std::uint64_t, SiteHash> siteOf;
  OpenAddressingMap<std::uint64_t> slotOfObject;  // object id + 1 -> slot
  std::vector<std::uint64_t> siteOfSlot;  // the live object's site
  std::vector<std::uint64_t> freeSlots;
  std::uint64_t milliseconds = 0;
  std::uint32_t thread = UINT32_MAX;

  std::uint64_t string(std::string_view text) {
    std::fprintf(out, "s %zx %.*s\n", text.size(), static_cast<int>(text.size()), text.data());
    return ++strings;
  }

  std::size_t frame(const std::string& name) {
    auto [it, added] = frameNamed.try_emplace(name, frameIp.size());
    if (added) {
      std::uint64_t function = string(name);
      // Synthetic instruction pointers, one per frame.
      std::fprintf(out, "i %" PRIx64 " 1 %" PRIx64 "\n", 0x1000 + 0x10 * ips, function);
      frameIp.push_back(++ips);
      backtraceAt.emplace_back();
    }
    return it->second;
  }

  void allocate(const Event& e) {
    std::uint64_t slot;
    if (freeSlots.empty()) {
      slot = siteOfSlot.size();
      siteOfSlot.push_back(0);
    } else {
      slot = freeSlots.back();
      freeSlots.pop_back();
    }
    std::size_t f = frame(heaptrackFrameName(e.op, e.alignment));
    auto& slots = backtraceAt[f];
    if (slots.size() <= slot) slots.resize(slot + 1, 0);
    if (slots[slot] == 0) {
      std::fprintf(out, "t %" PRIx64 " 0\n", frameIp[f]);
      slots[slot] = ++backtraces;
    }
    auto [it, added] = siteOf.try_emplace(SiteKey{e.size, slots[slot]}, sites);
    if (added) {
      std::fprintf(out, "a %" PRIx64 " %" PRIx64 "\n", e.size, slots[slot]);
      ++sites;
    }
    std::fprintf(out, "+ %" PRIx64 "\n", it->second);
    siteOfSlot[slot] = it->second;
    slotOfObject.insert(e.id + 1, slot);
  }

  void release(std::uint64_t id) {
    std::uint64_t slot = 0;
    slotOfObject.erase(id + 1, slot);  // the decoder has checked that the object is live
    std::fprintf(out, "- %" PRIx64 "\n", siteOfSlot[slot]);
    freeSlots.push_back(slot);
  }
};

LogExporter::LogExporter(LogFormat format, const unsigned char* trace, std::size_t size, std::FILE* out)
    : format_(format), decoder_(trace, size), out_(out) {
  if (format_ == LogFormat::Heaptrack) {
    heaptrack_ = std::make_unique<Heaptrack>();
    heaptrack_->out = out;
  }
}

LogExporter::~LogExporter() = default;

namespace {
// Synthetic addresses: distinct for every object, 16-byte aligned like malloc's.
std::uint64_t addressOf(std::uint64_t id) { return 0x10000 + id * 16; }

std::string oneLine(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}
}  // namespace

void LogExporter::writeHeaptrack(const Event& e) {
  Heaptrack& h = *heaptrack_;
  if (e.time / 1000000 > h.milliseconds) {
    h.milliseconds = e.time / 1000000;
    std::fprintf(out_, "c %" PRIx64 "\n", h.milliseconds);
  }
  if (e.thread != h.thread) {
    h.thread = e.thread;
    const auto& tids = decoder_.osThreadIds();
    std::fprintf(out_, "%.*s%" PRIu32 " tid %" PRIu64 "\n", static_cast<int>(kHeaptrackThreadComment.size()),
                 kHeaptrackThreadComment.data(), e.thread, e.thread < tids.size() ? tids[e.thread] : 0);
  }
  if (e.op == Op::Free) {
    h.release(e.id);
    return;
  }
  if (e.op == Op::Realloc) h.release(e.oldId);
  h.allocate(e);
}

bool LogExporter::step(std::uint64_t maxEvents) {
  if (!started_ && format_ == LogFormat::Mtrace) std::fputs("= Start\n", out_);
  if (!started_ && format_ == LogFormat::Heaptrack) {
    // heaptrack 1.4's version and file format 3, which heaptrack_print 1.2 and later read.
    std::string command = oneLine(decoder_.header().command.empty() ? "heapkit trace" : decoder_.header().command);
    std::fprintf(out_, "v 10400 3\nX %s\nI 1000 0\n", command.c_str());
    heaptrack_->string(kHeaptrackModule);
  }
  started_ = true;
  Event e;
  for (std::uint64_t n = 0; n < maxEvents; ++n) {
    if (!decoder_.next(e)) {
      if (decoder_.finished() && format_ == LogFormat::Mtrace) std::fputs("= End\n", out_);
      if (decoder_.finished() && format_ == LogFormat::Heaptrack)
        std::fprintf(out_, "c %" PRIx64 "\n", decoder_.time() / 1000000);  // the run's length
      if (std::ferror(out_)) throw std::runtime_error(std::string("cannot write the output: ") + std::strerror(errno));
      return false;
    }
    std::uint64_t a = addressOf(e.id);
    if (format_ == LogFormat::Heaptrack) {
      writeHeaptrack(e);
    } else if (format_ == LogFormat::Text) {
      if (e.op == Op::Free) {
        std::fprintf(out_, "%" PRIu64 " delete 0x%" PRIx64 "\n", e.time, a);
      } else {
        if (e.op == Op::Realloc) std::fprintf(out_, "%" PRIu64 " delete 0x%" PRIx64 "\n", e.time, addressOf(e.oldId));
        std::fprintf(out_, "%" PRIu64 " new 0x%" PRIx64 " %" PRIu64 "\n", e.time, a, e.size);
      }
    } else {
      if (e.op == Op::Free) {
        std::fprintf(out_, "@ [0x0] - 0x%" PRIx64 "\n", a);
      } else if (e.op == Op::Realloc) {
        std::fprintf(out_, "@ [0x0] < 0x%" PRIx64 "\n@ [0x0] > 0x%" PRIx64 " 0x%" PRIx64 "\n", addressOf(e.oldId), a, e.size);
      } else {
        std::fprintf(out_, "@ [0x0] + 0x%" PRIx64 " 0x%" PRIx64 "\n", a, e.size);
      }
    }
  }
  return true;
}

}  // namespace heapkit::trace
