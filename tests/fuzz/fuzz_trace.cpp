// libFuzzer target: whatever the bytes, decoding a trace (one operation or a batch at a
// time, which must agree), profiling it, exporting it as
// each log, reading them as a text, mtrace or heaptrack log (raw or interpreted), and
// decoding them as the recorder's spool records must end in success or a clean error: no
// crash, no hang, no out-of-bounds read (built with ASan and UBSan).
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "heapkit/trace/Convert.h"
#include "heapkit/trace/Spool.h"
#include "heapkit/trace/Stats.h"

using namespace heapkit::trace;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (bool liveness : {true, false}) {
    TraceDecoder decoder(data, size, liveness);
    Event e;
    std::vector<Operation> ops;
    while (decoder.next(e)) ops.push_back(Operation::of(e));
    if (!decoder.failed() && !decoder.finished()) __builtin_trap();  // must end one way or the other
    if (decoder.failed() && decoder.errorOffset() > size) __builtin_trap();
    // Batched decoding (the simulator's and the replayer's) must see the same operations
    // and stop at the same error.
    TraceDecoder batched(data, size, liveness);
    Operation batch[5];
    std::size_t at = 0;
    while (std::size_t n = batched.read(batch, 5)) {
      for (std::size_t i = 0; i < n; ++i, ++at)
        if (at >= ops.size() || batch[i].idOp != ops[at].idOp || batch[i].size != ops[at].size ||
            batch[i].extra != ops[at].extra)
          __builtin_trap();
    }
    if (at != ops.size() || batched.failed() != decoder.failed() || batched.error() != decoder.error() ||
        batched.offset() != decoder.offset())
      __builtin_trap();
  }
  {
    StatsBuilder stats(data, size, 5, 8);
    while (stats.step(1000)) {
    }
    if (!stats.failed()) (void)stats.result();
  }
  static std::FILE* sink = std::fopen("/dev/null", "w");
  for (LogFormat format : {LogFormat::Text, LogFormat::Mtrace, LogFormat::Heaptrack}) {
    LogExporter exporter(format, data, size, sink);
    while (exporter.step(1000)) {
    }
  }
  {
    spool::CodecState state;
    spool::Record record;
    const unsigned char* p = data;
    while (p != nullptr && p < data + size) p = spool::decode(p, data + size, record, state);
  }
  for (LogFormat format : {LogFormat::Text, LogFormat::Mtrace, LogFormat::Heaptrack}) {
    for (bool lenient : {false, true}) {
      try {
        LogImporter importer(format, sink, lenient, Header{});
        importer.feed(std::string_view(reinterpret_cast<const char*>(data), size));
        importer.finish();
      } catch (const std::runtime_error&) {
      } catch (const std::invalid_argument&) {
      }
    }
  }
  return 0;
}
