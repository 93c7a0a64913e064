// The trace format: round trips, compactness, and every kind of bad input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "heapkit/trace/Reader.h"
#include "heapkit/trace/Writer.h"

using namespace heapkit::trace;

namespace {

const unsigned char* bytes(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

std::string sample() {
  std::string out;
  TraceWriter w(&out);
  Header h;
  h.pid = 42;
  h.command = "prog --flag";
  h.source = "test";
  w.begin(h);
  w.setOsTid(0, 42);
  w.setOsTid(1, 43);
  auto a = w.malloc(0, 100, 24);
  auto b = w.calloc(0, 150, 80);
  auto c = w.aligned(1, 160, 64, 1000);
  auto d = w.realloc(1, 170, a, 48);
  w.free(0, 300, b);
  w.free(1, 310, c);
  w.free(0, 320, d);
  w.end();
  return out;
}

std::vector<Event> decodeAll(const std::string& s, std::string* error = nullptr) {
  TraceDecoder d(bytes(s), s.size());
  std::vector<Event> events;
  Event e;
  while (d.next(e)) events.push_back(e);
  if (error != nullptr) *error = d.failed() ? d.error() : "";
  return events;
}

}  // namespace

TEST(Varint, RoundTripsBoundaries) {
  for (std::uint64_t v : {0ull, 1ull, 127ull, 128ull, 16383ull, 16384ull, (1ull << 63) - 1, 1ull << 63, ~0ull}) {
    unsigned char buffer[kMaxVarintBytes];
    std::size_t n = putVarint(buffer, v);
    std::uint64_t back = 0;
    EXPECT_EQ(getVarint(buffer, buffer + n, back), buffer + n);
    EXPECT_EQ(back, v);
    EXPECT_EQ(getVarint(buffer, buffer + n - 1, back), nullptr) << "truncated varint " << v;
  }
  unsigned char tooLong[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0};
  std::uint64_t v;
  EXPECT_EQ(getVarint(tooLong, tooLong + 11, v), nullptr);
}

TEST(Trace, RoundTripsEveryOperation) {
  std::string s = sample();
  std::string error;
  auto events = decodeAll(s, &error);
  ASSERT_EQ(error, "");
  ASSERT_EQ(events.size(), 7u);
  EXPECT_EQ(events[0].op, Op::Malloc);
  EXPECT_EQ(events[0].size, 24u);
  EXPECT_EQ(events[0].time, 100u);
  EXPECT_EQ(events[1].op, Op::Calloc);
  EXPECT_EQ(events[1].id, 1u);
  EXPECT_EQ(events[2].op, Op::Aligned);
  EXPECT_EQ(events[2].alignment, 64u);
  EXPECT_EQ(events[2].thread, 1u);
  EXPECT_EQ(events[3].op, Op::Realloc);
  EXPECT_EQ(events[3].oldId, 0u);
  EXPECT_EQ(events[3].id, 3u);
  EXPECT_EQ(events[4].op, Op::Free);
  EXPECT_EQ(events[4].id, 1u);
  EXPECT_EQ(events[4].thread, 0u);
  EXPECT_EQ(events[6].id, 3u);
  EXPECT_EQ(events[6].time, 320u);

  TraceDecoder d(bytes(s), s.size());
  EXPECT_EQ(d.header().pid, 42u);
  EXPECT_EQ(d.header().command, "prog --flag");
  EXPECT_EQ(d.header().source, "test");
  Event e;
  while (d.next(e)) {
  }
  EXPECT_TRUE(d.finished());
  EXPECT_EQ(d.osThreadIds(), (std::vector<std::uint64_t>{42, 43}));
}

TEST(Trace, TimeNeverGoesBackwards) {
  std::string s;
  TraceWriter w(&s);
  w.begin({});
  w.malloc(0, 500, 1);
  w.malloc(1, 400, 1);  // another thread's clock is a little behind
  w.end();
  auto events = decodeAll(s);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].time, 500u);
}

TEST(Trace, ShortLivedObjectsCostFewBytes) {
  std::string s;
  TraceWriter w(&s);
  w.begin({});
  std::uint64_t t = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    auto id = w.malloc(0, t += 40, 16 + (i % 7) * 8);
    w.free(0, t += 40, id);
  }
  w.end();
  // 40 ns apart: a two-byte tag and a one-byte size or distance per operation.
  EXPECT_LT(static_cast<double>(s.size()) / (2.0 * n), 3.01);
  EXPECT_EQ(decodeAll(s).size(), 2u * n);
}

TEST(Trace, WriterRejectsIdsNeverAllocated) {
  std::string s;
  TraceWriter w(&s);
  w.begin({});
  EXPECT_THROW(w.free(0, 0, 0), std::invalid_argument);
  EXPECT_THROW(w.aligned(0, 0, 24, 8), std::invalid_argument);
}

// Every prefix of a valid trace is an error (never a crash, never success), with an offset
// no larger than the prefix.
TEST(BadInput, EveryTruncationIsAnError) {
  std::string s = sample();
  for (std::size_t n = 0; n < s.size(); ++n) {
    std::string error;
    decodeAll(s.substr(0, n), &error);
    ASSERT_NE(error, "") << "prefix of " << n << " bytes accepted";
    EXPECT_EQ(error.rfind("offset ", 0), 0u) << error;
  }
}

TEST(BadInput, OtherVersionIsRejected) {
  std::string s = sample();
  s[4] = 2;  // major version varint
  std::string error;
  decodeAll(s, &error);
  EXPECT_NE(error.find("unsupported trace format version 2.0"), std::string::npos) << error;
}

TEST(BadInput, BadMagic) {
  std::string error;
  decodeAll("GIF89a", &error);
  EXPECT_EQ(error, "offset 0: not a heapkit trace (bad magic number)");
}

std::string withBody(const std::function<void(TraceWriter&)>& body, bool end = true) {
  std::string s;
  TraceWriter w(&s);
  w.begin({});
  body(w);
  if (end) w.end();
  return s;
}

TEST(BadInput, FreeOfUnknownObject) {
  std::string s = withBody([](TraceWriter& w) { w.malloc(0, 0, 8); });
  // Replace the end record by a free five objects back.
  std::string head = s.substr(0, s.size() - 2);
  head += static_cast<char>(static_cast<unsigned>(Op::Free));
  head += static_cast<char>(5);
  head += static_cast<char>(static_cast<unsigned>(Op::End));
  head += static_cast<char>(2);
  std::string error;
  decodeAll(head, &error);
  EXPECT_NE(error.find("free of an unknown object"), std::string::npos) << error;
  EXPECT_EQ(error.find("offset " + std::to_string(s.size() - 2)), 0u) << error;
}

TEST(BadInput, DoubleFree) {
  std::string s = withBody([](TraceWriter& w) {
    auto a = w.malloc(0, 0, 8);
    w.free(0, 1, a);
  });
  std::string twice = s.substr(0, s.size() - 2) + s.substr(s.size() - 4, 2);
  twice += static_cast<char>(static_cast<unsigned>(Op::End));
  twice += static_cast<char>(3);
  std::string error;
  decodeAll(twice, &error);
  EXPECT_NE(error.find("free of object 0, which was already freed"), std::string::npos) << error;
}

TEST(BadInput, DataAfterEndAndWrongCount) {
  std::string s = withBody([](TraceWriter& w) { w.malloc(0, 0, 8); });
  std::string error;
  decodeAll(s + "x", &error);
  EXPECT_NE(error.find("1 bytes after the end record"), std::string::npos) << error;
  std::string wrong = s;
  wrong.back() = 7;
  decodeAll(wrong, &error);
  EXPECT_NE(error.find("the end record counts 7 operations but the trace holds 1"), std::string::npos) << error;
}

TEST(BadInput, UnknownRecordKindAndMissingThread) {
  std::string s = withBody([](TraceWriter&) {}, false);
  std::string error;
  decodeAll(s + "\x07", &error);
  EXPECT_NE(error.find("unknown record kind 7"), std::string::npos) << error;
  decodeAll(s + std::string("\x00\x08", 2), &error);
  EXPECT_NE(error.find("operation before any thread record"), std::string::npos) << error;
}

TEST(BadInput, SizesNoAllocationCanHave) {
  std::string error;
  decodeAll(withBody([](TraceWriter& w) { w.malloc(0, 0, kMaxObjectBytes); }), &error);
  EXPECT_EQ(error, "");
  std::string s = withBody([](TraceWriter& w) { w.malloc(0, 0, kMaxObjectBytes + 1); });
  EXPECT_TRUE(decodeAll(s, &error).empty());
  EXPECT_NE(error.find("larger than any allocation can be"), std::string::npos) << error;
  EXPECT_EQ(error.find("offset "), 0u) << error;
}

TEST(BadInput, ThreadNumbersTheWriterCannotTable) {
  std::string s;
  TraceWriter w(&s);
  w.begin({});
  EXPECT_NO_THROW(w.setOsTid(TraceWriter::kMaxThreadNumber, 7));
  EXPECT_THROW(w.setOsTid(TraceWriter::kMaxThreadNumber + 1, 7), std::invalid_argument);
  EXPECT_THROW(w.malloc(UINT32_MAX - 1, 0, 8), std::invalid_argument);
}

// ---- batched decoding -------------------------------------------------------------------

namespace {

// Operations of every kind, on three threads, with sizes, distances and time deltas of one
// to ten varint bytes.
std::string varied(unsigned seed) {
  std::string out;
  TraceWriter w(&out);
  w.begin({});
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  std::vector<std::uint64_t> live;
  std::uint64_t time = 0;
  for (int i = 0; i < 3000; ++i) {
    std::uint32_t thread = static_cast<std::uint32_t>(next() % 3);
    time += next() % 5 == 0 ? next() >> (next() % 64) : next() % 4;
    std::uint64_t size = next() % 4 == 0 ? (next() >> 8) >> (next() % 48) : next() % 200;
    std::uint64_t r = next() % 10;
    if (!live.empty() && r < 4) {
      std::size_t k = next() % live.size();
      w.free(thread, time, live[k]);
      live[k] = live.back();
      live.pop_back();
    } else if (!live.empty() && r == 4) {
      std::size_t k = next() % live.size();
      live[k] = w.realloc(thread, time, live[k], size);
    } else if (r == 5) {
      live.push_back(w.aligned(thread, time, std::uint64_t{1} << (next() % 41), size));
    } else if (r == 6) {
      live.push_back(w.calloc(thread, time, size));
    } else {
      live.push_back(w.malloc(thread, time, size));
    }
  }
  w.end();
  return out;
}

struct Decoded {
  std::vector<std::uint64_t> words;  // the operations, three words each
  std::string error;
  std::uint64_t offset = 0, events = 0, objects = 0;
  bool operator==(const Decoded&) const = default;
};

Decoded byNext(const std::string& s, bool liveness) {
  TraceDecoder d(bytes(s), s.size(), liveness);
  Decoded out;
  Event e;
  while (d.next(e)) {
    Operation o = Operation::of(e);
    out.words.insert(out.words.end(), {o.idOp, o.size, o.extra});
  }
  out.error = d.error();
  out.offset = d.offset();
  out.events = d.events();
  out.objects = d.objects();
  return out;
}

Decoded byRead(const std::string& s, bool liveness, std::size_t batch) {
  TraceDecoder d(bytes(s), s.size(), liveness);
  Decoded out;
  std::vector<Operation> ops(batch);
  while (std::size_t n = d.read(ops.data(), batch))
    for (std::size_t i = 0; i < n; ++i) out.words.insert(out.words.end(), {ops[i].idOp, ops[i].size, ops[i].extra});
  EXPECT_EQ(d.read(ops.data(), batch), 0u);  // and stays done
  out.error = d.error();
  out.offset = d.offset();
  out.events = d.events();
  out.objects = d.objects();
  return out;
}

}  // namespace

// read() is next() a batch at a time: the same operations, and on bad input the same error
// at the same offset, whatever the batch size.
TEST(BatchedRead, AgreesWithNextOnValidAndBrokenTraces) {
  for (unsigned seed = 1; seed <= 3; ++seed) {
    std::string s = varied(seed);
    std::vector<std::string> inputs = {s};
    for (std::size_t n = 0; n < s.size(); n += 1 + n / 16) inputs.push_back(s.substr(0, n));  // truncations
    for (std::size_t at = 0; at < s.size(); at += 1 + at / 32) {  // one byte changed
      std::string broken = s;
      broken[at] = static_cast<char>(broken[at] ^ (1 << (at % 8)));
      inputs.push_back(broken);
    }
    std::size_t failures = 0;
    for (const std::string& input : inputs) {
      for (bool liveness : {true, false}) {
        Decoded expected = byNext(input, liveness);
        failures += !expected.error.empty();
        for (std::size_t batch : {std::size_t{1}, std::size_t{7}, std::size_t{256}}) {
          ASSERT_EQ(byRead(input, liveness, batch), expected)
              << "seed " << seed << ", " << input.size() << " bytes, batch " << batch << ", liveness " << liveness
              << ": " << expected.error;
        }
      }
    }
    EXPECT_GT(failures, inputs.size() / 2) << "the broken inputs should mostly fail";
    EXPECT_TRUE(byNext(s, true).error.empty()) << byNext(s, true).error;
    EXPECT_EQ(byNext(s, true).events, 3000u);
  }
}

namespace {

// readRun()'s operations, with the thread of each, and where runs shorter than asked ended.
struct Runs {
  Decoded decoded;
  std::vector<std::uint32_t> threads;    // per operation, its run's thread
  std::vector<std::size_t> shortEnds;    // operation index after each run cut short before the end
};

Runs byRun(const std::string& s, bool liveness, std::size_t batch) {
  TraceDecoder d(bytes(s), s.size(), liveness);
  Runs out;
  std::vector<Operation> ops(batch);
  std::uint32_t thread = 0;
  while (std::size_t n = d.readRun(ops.data(), batch, thread)) {
    for (std::size_t i = 0; i < n; ++i) {
      out.decoded.words.insert(out.decoded.words.end(), {ops[i].idOp, ops[i].size, ops[i].extra});
      out.threads.push_back(thread);
    }
    if (n < batch && !d.finished() && !d.failed()) out.shortEnds.push_back(out.threads.size());
  }
  EXPECT_EQ(d.readRun(ops.data(), batch, thread), 0u);  // and stays done
  out.decoded.error = d.error();
  out.decoded.offset = d.offset();
  out.decoded.events = d.events();
  out.decoded.objects = d.objects();
  return out;
}

}  // namespace

// readRun() is read() cut where the thread changes: the same operations (and errors), each
// run of one thread, and a run shorter than asked only where the next operation is
// another thread's (a simulator that gives each thread its heap selects it per run).
TEST(RunRead, CutsBatchesWhereTheThreadChanges) {
  for (unsigned seed = 1; seed <= 3; ++seed) {
    std::string s = varied(seed);
    std::vector<Event> events = decodeAll(s);
    std::vector<std::string> inputs = {s};
    for (std::size_t n = 0; n < s.size(); n += 1 + n / 8) inputs.push_back(s.substr(0, n));
    for (const std::string& input : inputs) {
      for (bool liveness : {true, false}) {
        for (std::size_t batch : {std::size_t{1}, std::size_t{5}, std::size_t{256}}) {
          Runs runs = byRun(input, liveness, batch);
          ASSERT_EQ(runs.decoded, byRead(input, liveness, batch)) << "seed " << seed << ", batch " << batch;
          for (std::size_t i = 0; i < runs.threads.size(); ++i) ASSERT_EQ(runs.threads[i], events[i].thread) << i;
          for (std::size_t end : runs.shortEnds) {
            ASSERT_LT(end, events.size());
            EXPECT_NE(events[end].thread, events[end - 1].thread) << "a run cut short where the thread did not change";
          }
          if (input == s && batch == 256) {
            EXPECT_GT(runs.shortEnds.size(), 1000u);  // 3 threads, switching often
          }
        }
      }
    }
  }
}
