// Conversions between heapkit traces and other allocation logs (library heapkit_trace):
//  - text: the DMM papers' profiling format, "<time> new <address> <size>" and
//    "<time> delete <address>" (what utility/TraceHeap.h writes);
//  - mtrace: glibc's mtrace() log ("@ caller + 0xADDR 0xSIZE", "- ", "<", ">");
//  - heaptrack: heaptrack's data files, decompressed: the raw one (`heaptrack --raw`) and the
//    interpreted one that heaptrack_print and heaptrack_gui read (imported and exported);
//  - spool: the recorder's output (heapkit/trace/Spool.h).
// Importers take the log in pieces (feed), so callers can decompress and show progress.
// Errors are std::runtime_error with a one-line message that says where.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "heapkit/trace/OpenAddressingMap.h"
#include "heapkit/trace/Reader.h"
#include "heapkit/trace/Writer.h"

namespace heapkit::trace {

enum class LogFormat { Text, Mtrace, Heaptrack };

// Returns false if `name` is none of "text", "mtrace", "heaptrack".
bool parseLogFormat(std::string_view name, LogFormat& format);

struct ImportSummary {
  std::uint64_t lines = 0;
  std::uint64_t events = 0;
  std::uint64_t objects = 0;
  std::uint64_t unknownFrees = 0;   // skipped (lenient only): frees of addresses never allocated
  std::uint64_t reusedAddresses = 0;  // lenient only: an allocation at a live address ended it
  std::uint64_t failedAllocations = 0;  // null results, not objects
  std::uint64_t bytesWritten = 0;
};

class LogImporter {
 public:
  // Writes the trace to `out` as it goes. Strict importers reject a free of an unknown
  // address; lenient ones skip it and count it (logs that start after the program did
  // contain such frees).
  LogImporter(LogFormat format, std::FILE* out, bool lenient, Header header);
  ~LogImporter();
  LogImporter(const LogImporter&) = delete;
  LogImporter& operator=(const LogImporter&) = delete;

  void feed(std::string_view bytes);
  ImportSummary finish();  // closes the trace with its end record

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes a trace as text, mtrace or heaptrack's interpreted data file. Text and mtrace get
// synthetic addresses (traces hold ids, not addresses); neither has realloc in one line:
// text writes a delete and a new, mtrace its own "<" and ">" pair. Heaptrack frees name an
// allocation site (size and backtrace), not an address, so every live object gets a
// backtrace of its own (see Import.cpp) and the import finds exactly the object freed.
// Returns false and sets `error` on a bad trace.
class LogExporter {
 public:
  LogExporter(LogFormat format, const unsigned char* trace, std::size_t size, std::FILE* out);
  ~LogExporter();
  LogExporter(const LogExporter&) = delete;
  LogExporter& operator=(const LogExporter&) = delete;
  // Converts up to maxEvents operations; returns false when done (check failed()).
  bool step(std::uint64_t maxEvents);
  bool failed() const { return decoder_.failed(); }
  const std::string& error() const { return decoder_.error(); }
  std::uint64_t offset() const { return decoder_.offset(); }
  std::uint64_t events() const { return decoder_.events(); }

 private:
  struct Heaptrack;
  void writeHeaptrack(const Event& e);

  LogFormat format_;
  TraceDecoder decoder_;
  std::FILE* out_;
  bool started_ = false;
  std::unique_ptr<Heaptrack> heaptrack_;
};

struct MergeSummary {
  std::uint64_t pid = 0;
  std::uint64_t events = 0;
  std::uint64_t objects = 0;
  std::uint64_t threads = 0;
  std::uint64_t unknownFrees = 0;  // frees of memory allocated before recording began
  std::uint64_t truncatedRecords = 0;  // a chunk cut short (the process was killed)
  std::uint64_t bytesWritten = 0;
  std::string command;
};

// Turns one process's spool into a trace. Throws std::runtime_error on a corrupt spool.
MergeSummary mergeSpool(const std::string& spoolPath, std::FILE* out);

}  // namespace heapkit::trace
