// Importers, exporters, the spool merge and the statistics.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "heapkit/trace/Convert.h"
#include "heapkit/trace/Spool.h"
#include "heapkit/trace/Stats.h"

using namespace heapkit::trace;

namespace {

// A FILE* that collects what is written (open_memstream), read back as a string.
struct MemoryFile {
  char* data = nullptr;
  std::size_t size = 0;
  std::FILE* file = open_memstream(&data, &size);
  std::string take() {
    std::fflush(file);
    return std::string(data, size);
  }
  ~MemoryFile() {
    std::fclose(file);
    std::free(data);
  }
};

std::string import(LogFormat format, const std::string& log, bool lenient = false, ImportSummary* summary = nullptr,
                   std::size_t pieces = 1) {
  MemoryFile out;
  LogImporter importer(format, out.file, lenient, Header{});
  std::size_t step = log.size() / pieces + 1;
  for (std::size_t i = 0; i < log.size(); i += step) importer.feed(std::string_view(log).substr(i, step));
  ImportSummary s = importer.finish();
  if (summary != nullptr) *summary = s;
  return out.take();
}

std::vector<Event> decodeAll(const std::string& s) {
  TraceDecoder d(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  std::vector<Event> events;
  Event e;
  while (d.next(e)) events.push_back(e);
  EXPECT_FALSE(d.failed()) << d.error();
  return events;
}

std::string exportAs(LogFormat format, const std::string& trace) {
  MemoryFile out;
  LogExporter exporter(format, reinterpret_cast<const unsigned char*>(trace.data()), trace.size(), out.file);
  while (exporter.step(3)) {
  }
  EXPECT_FALSE(exporter.failed()) << exporter.error();
  return out.take();
}

const char* kText =
    "0 new 0x55d0a0 24\n"
    "1 new 0x55d0c0 100\n"
    "2 delete 0x55d0a0\n"
    "3 new 0x55d0a0 8\n"   // the address is reused by a new object
    "4 delete 0x55d0c0\n"
    "5 delete 0x55d0a0\n";

}  // namespace

TEST(TextFormat, ImportsAndRoundTrips) {
  for (std::size_t pieces : {1, 7, 1000}) {  // lines split across feeds
    std::string trace = import(LogFormat::Text, kText, false, nullptr, pieces);
    auto events = decodeAll(trace);
    ASSERT_EQ(events.size(), 6u);
    EXPECT_EQ(events[2].op, Op::Free);
    EXPECT_EQ(events[2].id, 0u);
    EXPECT_EQ(events[3].id, 2u);
    EXPECT_EQ(events[5].id, 2u);
    EXPECT_EQ(events[4].time, 4u);
  }
  // Back to text and in again: the same operations (addresses are synthetic).
  std::string trace = import(LogFormat::Text, kText);
  std::string text = exportAs(LogFormat::Text, trace);
  EXPECT_EQ(text.substr(0, text.find('\n')), "0 new 0x10000 24");
  std::string again = import(LogFormat::Text, text);
  auto a = decodeAll(trace), b = decodeAll(again);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].op, b[i].op);
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].size, b[i].size);
    EXPECT_EQ(a[i].time, b[i].time);
  }
}

TEST(TextFormat, ErrorsSayWhere) {
  try {
    import(LogFormat::Text, "0 new 0x10 8\n1 delete 0x20\n");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "line 2 (offset 13): free of unknown address 0x20 (use --lenient to skip such frees)");
  }
  EXPECT_THROW(import(LogFormat::Text, "0 malloc 0x10 8\n"), std::runtime_error);
  EXPECT_THROW(import(LogFormat::Text, "0 new 0x10\n"), std::runtime_error);
  EXPECT_THROW(import(LogFormat::Text, "0 new 0x10 8\n0 new 0x10 8\n"), std::runtime_error);
  ImportSummary s;
  std::string trace = import(LogFormat::Text, "0 new 0x10 8\n1 delete 0x20\n", true, &s);
  EXPECT_EQ(s.unknownFrees, 1u);
  EXPECT_EQ(decodeAll(trace).size(), 1u);
}

TEST(Mtrace, ImportsReallocAndIgnoresCallers) {
  const char* log =
      "= Start\n"
      "@ ./a.out:[0x40054d] + 0x1bd4460 0x10\n"
      "@ /lib/x86_64-linux-gnu/libc.so.6:(clearenv+0x5d)[0x7f] + 0x1bd4480 0x20\n"
      "@ [0x400562] < 0x1bd4460\n"
      "@ [0x400562] > 0x1bd44b0 0x100\n"
      "@ [0x400577] - 0x1bd44b0\n"
      "@ [0x400577] - 0x1bd4480\n"
      "= End\n";
  ImportSummary s;
  auto events = decodeAll(import(LogFormat::Mtrace, log, false, &s));
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[2].op, Op::Realloc);
  EXPECT_EQ(events[2].oldId, 0u);
  EXPECT_EQ(events[2].size, 256u);
  EXPECT_EQ(events[3].id, 2u);
  EXPECT_EQ(events[4].id, 1u);
  // and out again
  std::string back = exportAs(LogFormat::Mtrace, import(LogFormat::Mtrace, log));
  EXPECT_NE(back.find("@ [0x0] < 0x10000\n@ [0x0] > 0x10020 0x100\n"), std::string::npos) << back;
  EXPECT_EQ(decodeAll(import(LogFormat::Mtrace, back)).size(), 5u);
  EXPECT_THROW(import(LogFormat::Mtrace, "@ [0x1] > 0x10 0x10\n"), std::runtime_error);
}

TEST(Heaptrack, ImportsRawData) {
  // Lines as libheaptrack_preload writes them (heaptrack --raw), hex throughout.
  const char* log =
      "v 10400 3\n"
      "x 9 /tmp/ht/t\n"
      "m 1f /lib/x86_64-linux-gnu/libc.so.6 7f2f084a0000 0 25388\n"
      "t 7f2f086bcb9f 0\n"
      "+ 11c00 4 5565d5283530\n"
      "+ a 8 5565d52951d0\n"
      "c 3\n"
      "- 5565d52951d0\n"
      "- 5565d5283530\n"
      "c 1\n"
      "R 3bf\n";
  auto events = decodeAll(import(LogFormat::Heaptrack, log));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].size, 0x11c00u);
  EXPECT_EQ(events[2].id, 1u);
  EXPECT_EQ(events[2].time, 3000000u);
  EXPECT_THROW(import(LogFormat::Heaptrack, "+ zz 4 10\n"), std::runtime_error);
}

namespace {
spool::Record SpoolBuilderRecord(std::uint64_t seq, spool::Kind kind, std::uint64_t tsc, std::uint64_t address, std::uint64_t a,
                                 std::uint64_t b = 0) {
  return {seq << 8 | static_cast<std::uint64_t>(kind), tsc, address, a, b};
}
}  // namespace

TEST(Heaptrack, ExportRoundTripsEveryOperationAndThread) {
  // Two threads; objects of one size live at once (one allocation site in heaptrack's
  // terms, yet each free must end the right one); every kind of call; times in ms.
  MemoryFile out;
  {
    TraceWriter w(out.file);
    w.begin({});
    w.setOsTid(0, 100);
    w.setOsTid(1, 200);
    auto a = w.malloc(0, 0, 24);
    auto b = w.malloc(0, 1000000, 24);
    auto c = w.calloc(1, 2000000, 24);
    auto d = w.aligned(1, 2500000, 4096, 100);
    w.free(0, 3000000, b);  // the middle one of three of size 24
    auto e = w.realloc(1, 3000000, a, 48);
    w.free(1, 7000000, c);
    w.free(0, 7000000, d);
    auto f = w.malloc(0, 9000000, 24);  // reuses a slot
    w.free(1, 9000000, e);
    (void)f;  // leaked
    w.end();
  }
  std::string trace = out.take();
  std::string log = exportAs(LogFormat::Heaptrack, trace);
  EXPECT_EQ(log.rfind("v 10400 3\n", 0), 0u) << log;
  EXPECT_NE(log.find("aligned_alloc [alignment 4096]"), std::string::npos);
  for (std::size_t pieces : {1, 5, 300}) {
    ImportSummary summary;
    std::string back = import(LogFormat::Heaptrack, log, false, &summary, pieces);
    auto before = decodeAll(trace), after = decodeAll(back);
    ASSERT_EQ(before.size(), after.size());
    EXPECT_EQ(summary.events, before.size());
    for (std::size_t i = 0; i < before.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(after[i].op, before[i].op);
      EXPECT_EQ(after[i].id, before[i].id);
      EXPECT_EQ(after[i].oldId, before[i].oldId);
      EXPECT_EQ(after[i].size, before[i].size);
      EXPECT_EQ(after[i].alignment, before[i].alignment);
      EXPECT_EQ(after[i].thread, before[i].thread);
      EXPECT_EQ(after[i].time / 1000000, before[i].time / 1000000);
    }
    TraceDecoder d(reinterpret_cast<const unsigned char*>(back.data()), back.size());
    Event e;
    while (d.next(e)) {
    }
    EXPECT_EQ(d.osThreadIds(), (std::vector<std::uint64_t>{100, 200}));
  }
}

TEST(Heaptrack, ImportsInterpretedDataOfARealProgram) {
  // As heaptrack_interpret writes it: frees name a site, so two live objects of one site
  // end latest first; the frames are the program's, so every allocation is a malloc.
  const char* log =
      "v 10400 3\n"
      "X ./p\n"
      "I 1000 5e2990\n"
      "s 9 /tmp/ht/p\n"
      "s 4 main\n"
      "i 55afd4aae18c 1 2\n"
      "t 1 0\n"
      "a 18 1\n"
      "+ 0\n"
      "+ 0\n"
      "c 2\n"
      "- 0\n"
      "a 30 1\n"
      "+ 1\n"
      "- 0\n"
      "- 1\n"
      "R 3ab\n"
      "# strings: 2\n";
  auto events = decodeAll(import(LogFormat::Heaptrack, log));
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].op, Op::Malloc);
  EXPECT_EQ(events[0].size, 0x18u);
  EXPECT_EQ(events[2].op, Op::Free);
  EXPECT_EQ(events[2].id, 1u);
  EXPECT_EQ(events[2].time, 2000000u);
  EXPECT_EQ(events[3].op, Op::Malloc);  // a "realloc"-less free then malloc stay two
  EXPECT_EQ(events[4].id, 0u);
  // Strict: a free at a site with nothing live is an error naming the line; lenient skips it.
  std::string bad = std::string(log) + "- 1\n";
  try {
    import(LogFormat::Heaptrack, bad);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("line 19 (offset"), std::string::npos) << error.what();
  }
  ImportSummary summary;
  import(LogFormat::Heaptrack, bad, true, &summary);
  EXPECT_EQ(summary.unknownFrees, 1u);
  EXPECT_THROW(import(LogFormat::Heaptrack, "v 10400 3\na 10 0\n+ 1\n"), std::runtime_error);
  EXPECT_THROW(import(LogFormat::Heaptrack, "v 10400 3\ns 1 x\nt 1 0\n"), std::runtime_error);
  EXPECT_THROW(import(LogFormat::Heaptrack, "v 10400 3\ni 10 5\n"), std::runtime_error);
  EXPECT_THROW(import(LogFormat::Heaptrack, "v 10400 3\nc ffffffffffffff\n"), std::runtime_error);
}

TEST(Spool, RecordsRoundTripAtEveryFieldWidth) {
  using K = spool::Kind;
  std::vector<spool::Record> records;
  std::uint64_t seq = 0, tsc = 5;
  for (std::uint64_t v : {0ull, 1ull, 0x7full, 0x80ull, 0xffffull, 0x1000000ull, 0x7fffffffffffull, ~0ull}) {
    records.push_back(SpoolBuilderRecord(seq += 1, K::Malloc, tsc, 0x7f0000001000ull + v, v));
    records.push_back(SpoolBuilderRecord(seq += 7, K::Aligned, tsc += v >> 20, 0x1000, v, 1ull << (v % 41)));
    records.push_back(SpoolBuilderRecord(seq += 1, K::Release, tsc, v, 0));
    records.push_back(SpoolBuilderRecord(seq += 1, K::Realloc, tsc += 3, v, 0x5555aaaa0000ull - v, v));
    records.push_back(SpoolBuilderRecord(seq += 1000000, K::Free, tsc, ~v, 0));
    records.push_back(SpoolBuilderRecord(seq += 1, K::Calloc, tsc, 16, v));
  }
  std::vector<unsigned char> bytes(records.size() * spool::kMaxRecordBytes);
  spool::CodecState state;
  unsigned char* p = bytes.data();
  for (const auto& r : records) p = spool::encode(p, r, state);
  const unsigned char* end = p;
  spool::CodecState decoding;
  const unsigned char* q = bytes.data();
  for (const auto& want : records) {
    spool::Record got{};
    q = spool::decode(q, end, got, decoding);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(got.seqKind, want.seqKind);
    EXPECT_EQ(got.tsc, want.tsc);
    EXPECT_EQ(got.address, want.address);
    EXPECT_EQ(got.a, want.a);
    EXPECT_EQ(got.b, want.b);
  }
  EXPECT_EQ(q, end);
  // Cut anywhere inside a record, decoding stops there instead of reading past the end.
  for (const unsigned char* cut = bytes.data(); cut < end; ++cut) {
    spool::CodecState s;
    spool::Record r{};
    const unsigned char* at = bytes.data();
    while (at != nullptr && at < cut) at = spool::decode(at, cut, r, s);
    EXPECT_TRUE(at == nullptr || at == cut);
  }
  unsigned char reserved[] = {6, 0};  // kinds 6 and 7 do not exist
  spool::Record r{};
  spool::CodecState s;
  EXPECT_EQ(spool::decode(reserved, reserved + 2, r, s), nullptr);
}

namespace {
// Builds a spool as the recorder writes it.
struct SpoolBuilder {
  std::string bytes;
  std::uint64_t seq = 0;
  explicit SpoolBuilder(const std::string& command) {
    spool::FileHeader h{};
    std::memcpy(h.magic, spool::kMagic, 8);
    h.pid = 77;
    h.commandBytes = static_cast<std::uint32_t>(command.size());
    h.tsc0 = 1000;
    h.ns0 = 0;
    h.unixNs0 = 5;
    bytes.append(reinterpret_cast<char*>(&h), sizeof h);
    bytes += command;
    bytes.resize((bytes.size() + 7) & ~std::size_t{7}, '\0');
  }
  void chunk(std::uint32_t tid, const std::vector<spool::Record>& records, std::uint64_t tsc) {
    std::vector<unsigned char> encoded(records.size() * spool::kMaxRecordBytes);
    spool::CodecState state;
    unsigned char* p = encoded.data();
    for (const auto& r : records) p = spool::encode(p, r, state);
    auto used = static_cast<std::uint32_t>(p - encoded.data());
    spool::ChunkHeader c{spool::kChunkMagic, tid, static_cast<std::uint32_t>(records.size()), used, tsc, (tsc - 1000) * 2, 0};
    bytes.append(reinterpret_cast<char*>(&c), sizeof c);
    bytes.append(reinterpret_cast<const char*>(encoded.data()), used);
  }
  static spool::Record rec(std::uint64_t seq, spool::Kind kind, std::uint64_t tsc, std::uint64_t address, std::uint64_t a,
                           std::uint64_t b = 0) {
    return {seq << 8 | static_cast<std::uint64_t>(kind), tsc, address, a, b};
  }
};

MergeSummary merge(const std::string& spoolBytes, std::string& trace) {
  char path[] = "/tmp/heapkit-spool-test-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_EQ(write(fd, spoolBytes.data(), spoolBytes.size()), static_cast<ssize_t>(spoolBytes.size()));
  close(fd);
  MemoryFile out;
  MergeSummary s = mergeSpool(path, out.file);
  unlink(path);
  trace = out.take();
  return s;
}
}  // namespace

TEST(Spool, MergesThreadsInSequenceOrder) {
  using K = spool::Kind;
  SpoolBuilder b(std::string("prog\0arg", 8));
  // Thread 2 frees what thread 1 allocated; its chunk is flushed first. The address 0xa0
  // is reused after the free (by sequence number, not by file order).
  b.chunk(2, {SpoolBuilder::rec(1, K::Free, 1003, 0xa0, 0), SpoolBuilder::rec(4, K::Free, 1006, 0x999, 0)}, 1010);
  b.chunk(1, {SpoolBuilder::rec(0, K::Malloc, 1001, 0xa0, 32), SpoolBuilder::rec(2, K::Calloc, 1004, 0xa0, 64),
              SpoolBuilder::rec(3, K::Release, 1005, 0xa0, 0), SpoolBuilder::rec(5, K::Realloc, 1005, 0xa0, 0xb0, 128),
              SpoolBuilder::rec(6, K::Aligned, 1007, 0xc0, 10, 64)},
          1011);
  std::string trace;
  MergeSummary s = merge(b.bytes, trace);
  EXPECT_EQ(s.command, "prog arg");
  EXPECT_EQ(s.threads, 2u);
  EXPECT_EQ(s.unknownFrees, 1u);
  TraceDecoder d(reinterpret_cast<const unsigned char*>(trace.data()), trace.size());
  EXPECT_EQ(d.header().pid, 77u);
  std::vector<Event> events;
  Event e;
  while (d.next(e)) events.push_back(e);
  ASSERT_FALSE(d.failed()) << d.error();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].op, Op::Malloc);
  EXPECT_EQ(events[1].op, Op::Free);
  EXPECT_EQ(events[1].id, 0u);
  EXPECT_EQ(events[1].thread, 1u);  // thread 1 in the trace: the second to appear
  EXPECT_EQ(events[2].op, Op::Calloc);
  EXPECT_EQ(events[3].op, Op::Realloc);
  EXPECT_EQ(events[3].oldId, 1u);
  EXPECT_EQ(events[4].alignment, 64u);
  EXPECT_EQ(events[0].time, 2u);  // ticks -> ns at 2 ns per tick
  EXPECT_EQ(d.osThreadIds(), (std::vector<std::uint64_t>{1, 2}));
}

TEST(Spool, KilledMidChunkKeepsWholeRecords) {
  using K = spool::Kind;
  SpoolBuilder b("p");
  b.chunk(1, {SpoolBuilder::rec(0, K::Malloc, 1001, 0xa0, 32), SpoolBuilder::rec(1, K::Malloc, 1002, 0xb0, 32)}, 1003);
  std::string cut = b.bytes.substr(0, b.bytes.size() - 2);  // into the second record
  std::string trace;
  MergeSummary s = merge(cut, trace);
  EXPECT_EQ(s.truncatedRecords, 1u);
  EXPECT_EQ(s.events, 1u);
  std::string garbage = b.bytes;
  garbage[48] = 'X';  // the chunk magic
  EXPECT_THROW(merge(garbage, trace), std::runtime_error);
  EXPECT_THROW(merge("short", trace), std::runtime_error);
}

TEST(Stats, CountsTheTextExample) {
  std::string trace = import(LogFormat::Text, kText);
  StatsBuilder builder(reinterpret_cast<const unsigned char*>(trace.data()), trace.size());
  while (builder.step(2)) {
  }
  ASSERT_FALSE(builder.failed()) << builder.error();
  TraceStats s = builder.result();
  EXPECT_EQ(s.events, 6u);
  EXPECT_EQ(s.objects, 3u);
  EXPECT_EQ(s.totalBytes, 132u);
  EXPECT_EQ(s.maxLiveBytes, 124u);
  EXPECT_EQ(s.maxLiveObjects, 2u);
  EXPECT_EQ(s.frees, 3u);
  EXPECT_EQ(s.endLiveBytes, 0u);
  EXPECT_DOUBLE_EQ(s.averageSize(), 44.0);
  EXPECT_EQ(s.sizeHistogram[4], 1u);  // 8
  EXPECT_EQ(s.sizeHistogram[5], 1u);  // 24
  EXPECT_EQ(s.sizeHistogram[7], 1u);  // 100
  ASSERT_EQ(s.topSizes.size(), 3u);
  EXPECT_EQ(s.topSizes[0], (std::pair<std::uint64_t, std::uint64_t>{8, 1}));
  EXPECT_DOUBLE_EQ(s.lifetimeEventsMean, 7.0 / 3.0);  // lifetimes 2, 3, 2
  ASSERT_FALSE(s.liveOverTime.empty());
  std::uint64_t peak = 0;
  for (auto& p : s.liveOverTime) peak = std::max(peak, p.bytes);
  EXPECT_EQ(peak, 124u);
}

TEST(Stats, LiveSeriesStaysBoundedAndKeepsThePeak) {
  MemoryFile out;
  {
    TraceWriter w(out.file);
    w.begin({});
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 10000; ++i) ids.push_back(w.malloc(0, i, 10));
    for (auto id : ids) w.free(0, 20000, id);
    w.end();
  }
  std::string trace = out.take();
  StatsBuilder builder(reinterpret_cast<const unsigned char*>(trace.data()), trace.size(), 10, 50);
  while (builder.step(1000)) {
  }
  TraceStats s = builder.result();
  EXPECT_LE(s.liveOverTime.size(), 101u);
  std::uint64_t peak = 0;
  for (auto& p : s.liveOverTime) peak = std::max(peak, p.bytes);
  EXPECT_EQ(peak, 100000u);
  EXPECT_EQ(s.maxLiveBytes, 100000u);
}

TEST(Stats, TotalsPastSixtyFourBitsAreAnError) {
  // Each size is allowed (at most 2^56); 256 of them add up to 2^64.
  std::string trace;
  TraceWriter w(&trace);
  w.begin({});
  for (int i = 0; i < 300; ++i) w.malloc(0, 0, kMaxObjectBytes);
  w.end();
  StatsBuilder builder(reinterpret_cast<const unsigned char*>(trace.data()), trace.size());
  while (builder.step(1000)) {
  }
  ASSERT_TRUE(builder.failed());
  EXPECT_NE(builder.error().find("past 2^64 bytes"), std::string::npos) << builder.error();
  EXPECT_FALSE(builder.step(1000));
}
