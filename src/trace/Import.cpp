// Importers and exporters for the text, mtrace and heaptrack logs (heapkit/trace/Convert.h).
#include <charconv>
#include <cinttypes>
#include <stdexcept>
#include <string>
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

}  // namespace

struct LogImporter::Impl {
  LogFormat format;
  TraceWriter writer;
  bool lenient;
  AddressMap live;
  ImportSummary summary;
  std::string pending;  // a line split across feeds
  std::uint64_t lineStart = 0;  // byte offset of the line being parsed
  std::uint64_t consumed = 0;
  std::uint64_t time = 0;       // text: the line's time; heaptrack: the latest "c" line, in ns
  bool reallocPending = false;  // mtrace: a "<" waits for its ">"
  bool reallocKnown = false;
  std::uint64_t reallocOld = 0;

  Impl(LogFormat f, std::FILE* out, bool l) : format(f), writer(out), lenient(l) {}

  [[noreturn]] void error(const std::string& message) const {
    throw std::runtime_error("line " + std::to_string(summary.lines) + " (offset " + std::to_string(lineStart) +
                             "): " + message);
  }

  // Text lines carry their own time; heaptrack a clock now and then; mtrace none, so its
  // time is the event number, which keeps order and distances.
  std::uint64_t now() const { return format == LogFormat::Mtrace ? summary.events : time; }

  void allocate(std::uint64_t address, std::uint64_t size, Op op = Op::Malloc, bool haveOld = false, std::uint64_t oldId = 0) {
    if (address == 0) {
      ++summary.failedAllocations;
      return;
    }
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

  void parseText(const std::vector<std::string_view>& t) {
    if (t.empty() || t[0][0] == '#') return;
    std::uint64_t stamp, address, size;
    if (t.size() < 3 || !parseNumber(t[0], 10, stamp)) error("expected '<time> new <address> <size>' or '<time> delete <address>'");
    if (!parseAddress(t[2], address)) error("bad address '" + std::string(t[2]) + "'");
    if (t[1] == "new") {
      if (t.size() != 4 || !parseNumber(t[3], 10, size)) error("expected '<time> new <address> <size>'");
      time = stamp;
      allocate(address, size);
    } else if (t[1] == "delete") {
      if (t.size() != 3) error("expected '<time> delete <address>'");
      time = stamp;
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

  void parseHeaptrack(const std::vector<std::string_view>& t) {
    if (t.empty()) return;
    std::uint64_t value, address;
    if (t[0] == "+") {
      // "+ size trace-index address", all hex
      if (t.size() != 4 || !parseNumber(t[1], 16, value) || !parseNumber(t[3], 16, address))
        error("expected '+ <size> <trace> <address>'");
      allocate(address, value);
    } else if (t[0] == "-") {
      if (t.size() != 2 || !parseNumber(t[1], 16, address)) error("expected '- <address>'");
      freeAddress(address);
    } else if (t[0] == "c") {
      // Elapsed milliseconds since start, written now and then.
      if (t.size() != 2 || !parseNumber(t[1], 16, value)) error("expected 'c <elapsed ms>'");
      if (value * 1000000 > time) time = value * 1000000;
    } else if (t[0] == "v") {
      if (summary.events == 0 && t.size() >= 3 && parseNumber(t[2], 16, value) && value < 2)
        error("heaptrack file version " + std::to_string(value) + " is too old (need 2 or later)");
    }
    // Other lines (modules, traces, instruction pointers, RSS, ...) carry no operation.
  }

  void line(std::string_view text) {
    ++summary.lines;
    auto tokens = split(text);
    switch (format) {
      case LogFormat::Text: parseText(tokens); break;
      case LogFormat::Mtrace: parseMtrace(tokens); break;
      case LogFormat::Heaptrack: parseHeaptrack(tokens); break;
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
  m.writer.end();
  m.summary.objects = m.writer.objects();
  m.summary.bytesWritten = m.writer.bytesWritten();
  return m.summary;
}

// ---------------------------------------------------------------------------------------

LogExporter::LogExporter(LogFormat format, const unsigned char* trace, std::size_t size, std::FILE* out)
    : format_(format), decoder_(trace, size), out_(out) {
  if (format_ == LogFormat::Heaptrack) throw std::invalid_argument("exporting to heaptrack's format is not supported");
}

namespace {
// Synthetic addresses: distinct for every object, 16-byte aligned like malloc's.
std::uint64_t addressOf(std::uint64_t id) { return 0x10000 + id * 16; }
}  // namespace

bool LogExporter::step(std::uint64_t maxEvents) {
  if (!started_ && format_ == LogFormat::Mtrace) std::fputs("= Start\n", out_);
  started_ = true;
  Event e;
  for (std::uint64_t n = 0; n < maxEvents; ++n) {
    if (!decoder_.next(e)) {
      if (decoder_.finished() && format_ == LogFormat::Mtrace) std::fputs("= End\n", out_);
      if (std::ferror(out_)) throw std::runtime_error("cannot write the output");
      return false;
    }
    std::uint64_t a = addressOf(e.id);
    if (format_ == LogFormat::Text) {
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
