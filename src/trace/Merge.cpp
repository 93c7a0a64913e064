// mergeSpool: the recorder's per-thread chunks of raw records -> one trace in global order.
#include <algorithm>
#include <array>
#include <cstring>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "heapkit/trace/Convert.h"
#include "heapkit/trace/Spool.h"

namespace heapkit::trace {

namespace {

struct Run {  // a chunk's encoded records
  const unsigned char* begin;
  const unsigned char* end;
  std::uint32_t count;
  std::uint64_t seqBase;
};

// One thread's records, decoded across its chunks a few records ahead of the one being
// merged: each decoded record's address map slots are prefetched then, so by the time the
// record is merged its slot is in cache. (The map outgrows the cache on any large trace,
// and a miss per record was most of the merge's time.)
struct ThreadStream {
  static constexpr std::size_t kLookahead = 16;  // a power of two; about one memory latency of records

  std::uint32_t tid;
  std::vector<Run> runs;
  std::size_t run = 0;
  const unsigned char* p = nullptr;
  std::uint32_t left = 0;  // records still to decode in this run
  bool exhausted = false;
  spool::CodecState state;
  std::array<spool::Record, kLookahead> ahead{};
  std::size_t head = 0, buffered = 0;  // ahead[head] is the current record
  std::uint64_t* truncated = nullptr;
  bool parked = false;  // a realloc's Release seen, its Realloc not yet
  std::uint64_t parkedId = 0, parkedAddress = 0;

  const spool::Record* current() const { return &ahead[head]; }

  // Moves to the next record (the first, on the first call); false at the end of the
  // thread's records.
  bool advance(const OpenAddressingMap<std::uint64_t>& live) {
    if (buffered > 0) {
      head = (head + 1) % kLookahead;
      --buffered;
    }
    while (buffered < kLookahead && !exhausted) {
      spool::Record& next = ahead[(head + buffered) % kLookahead];
      if (!decodeNext(next)) {
        exhausted = true;
        break;
      }
      live.prefetch(next.address);
      if (static_cast<spool::Kind>(next.seqKind & 0xff) == spool::Kind::Realloc) live.prefetch(next.a);
      ++buffered;
    }
    return buffered > 0;
  }

 private:
  // A chunk that ends early (the process was killed while writing it) loses its
  // remaining records.
  bool decodeNext(spool::Record& into) {
    for (;;) {
      if (left > 0) {
        const unsigned char* q = spool::decode(p, runs[run].end, into, state);
        if (q != nullptr) {
          p = q;
          --left;
          return true;
        }
        *truncated += left;
        left = 0;
      }
      if (p == nullptr) run = 0;
      else ++run;
      if (run >= runs.size()) return false;
      p = runs[run].begin;
      left = runs[run].count;
      state = {runs[run].seqBase, 0, 0};
    }
  }
};

}  // namespace

MergeSummary mergeSpool(const std::string& spoolPath, std::FILE* out) {
  MappedFile file(spoolPath);
  const unsigned char* data = file.data();
  const std::size_t size = file.size();
  auto corrupt = [&](std::size_t offset, const std::string& what) {
    return std::runtime_error(spoolPath + ": offset " + std::to_string(offset) + ": " + what);
  };
  spool::FileHeader header;
  if (size < sizeof header) throw corrupt(0, "not a heapkit spool (too short)");
  std::memcpy(&header, data, sizeof header);
  if (std::memcmp(header.magic, spool::kMagic, sizeof header.magic) != 0) throw corrupt(0, "not a heapkit spool (bad magic)");
  if (header.commandBytes > size - sizeof header) throw corrupt(8, "truncated command line");

  MergeSummary summary;
  summary.pid = header.pid;
  std::string command(reinterpret_cast<const char*>(data + sizeof header), header.commandBytes);
  while (!command.empty() && command.back() == '\0') command.pop_back();
  std::replace(command.begin(), command.end(), '\0', ' ');
  summary.command = command;

  std::size_t offset = sizeof header + ((header.commandBytes + 7) & ~std::size_t{7});
  std::vector<ThreadStream> threads;
  std::unordered_map<std::uint32_t, std::size_t> byTid;
  std::uint64_t lastTsc = header.tsc0, lastNs = header.ns0;
  while (offset < size) {
    spool::ChunkHeader chunk;
    if (size - offset < sizeof chunk) {
      ++summary.truncatedRecords;
      break;
    }
    std::memcpy(&chunk, data + offset, sizeof chunk);
    if (chunk.magic != spool::kChunkMagic) throw corrupt(offset, "bad chunk header");
    offset += sizeof chunk;
    std::size_t bytes = std::min<std::size_t>(chunk.bytes, size - offset);  // short if the process died writing it
    auto [it, added] = byTid.try_emplace(chunk.tid, threads.size());
    if (added) {
      threads.emplace_back();
      threads.back().tid = chunk.tid;
    }
    threads[it->second].runs.push_back({data + offset, data + offset + bytes, chunk.count, chunk.seqBase});
    if (chunk.ns > lastNs) {
      lastNs = chunk.ns;
      lastTsc = chunk.tsc;
    }
    offset += bytes;
  }

  double nsPerTick = lastTsc > header.tsc0 ? static_cast<double>(lastNs - header.ns0) / static_cast<double>(lastTsc - header.tsc0) : 1.0;
  // Most records repeat their thread's last clock reading (the recorder reads it every
  // 16th record), so the last conversion is kept.
  std::uint64_t lastTicks = 0, lastTicksNs = 0;
  auto toNs = [&](std::uint64_t tsc) -> std::uint64_t {
    if (tsc != lastTicks) [[unlikely]] {
      lastTicks = tsc;
      lastTicksNs = tsc > header.tsc0 ? static_cast<std::uint64_t>(static_cast<double>(tsc - header.tsc0) * nsPerTick) : 0;
    }
    return lastTicksNs;
  };

  TraceWriter writer(out);
  Header traceHeader;
  traceHeader.pid = header.pid;
  traceHeader.startUnixNs = header.unixNs0;
  traceHeader.command = command;
  traceHeader.source = "record";
  writer.begin(traceHeader);

  // k-way merge on the global sequence number; each thread's records are already in order.
  // Two threads' records share a number only where a thread the recorder did not see
  // start raced with the first one (Recorder.cpp, nextSequence); the earlier thread goes first.
  auto later = [&](std::size_t a, std::size_t b) {
    std::uint64_t sa = threads[a].current()->seqKind >> 8, sb = threads[b].current()->seqKind >> 8;
    return sa != sb ? sa > sb : a > b;
  };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> ready(later);
  OpenAddressingMap<std::uint64_t> live;  // address -> object id
  for (std::size_t i = 0; i < threads.size(); ++i) {
    writer.setOsTid(static_cast<std::uint32_t>(i), threads[i].tid);
    threads[i].truncated = &summary.truncatedRecords;
    if (threads[i].advance(live)) ready.push(i);
  }

  std::uint64_t id = 0;
  while (!ready.empty()) {
    std::size_t ti = ready.top();
    ready.pop();
    ThreadStream& t = threads[ti];
    const std::uint32_t thread = static_cast<std::uint32_t>(ti);
    do {
      const spool::Record& r = *t.current();
      std::uint64_t time = toNs(r.tsc);
      auto allocate = [&](std::uint64_t address, std::uint64_t newId) { live.insert(address, newId); };
      auto endAt = [&](std::uint64_t address) {
        // An allocation at a live address: a free the recorder could not see (memory
        // released by a path that bypasses free); end the old object there.
        if (live.erase(address, id)) writer.free(thread, time, id);
      };
      switch (static_cast<spool::Kind>(r.seqKind & 0xff)) {
        case spool::Kind::Malloc:
          endAt(r.address);
          allocate(r.address, writer.malloc(thread, time, r.a));
          break;
        case spool::Kind::Calloc:
          endAt(r.address);
          allocate(r.address, writer.calloc(thread, time, r.a));
          break;
        case spool::Kind::Aligned:
          endAt(r.address);
          allocate(r.address, writer.aligned(thread, time, r.b, r.a));
          break;
        case spool::Kind::Release:
          // The old object leaves the address map now; its id waits for the Realloc.
          t.parked = live.erase(r.address, id);
          t.parkedId = id;
          t.parkedAddress = r.address;
          if (!t.parked) ++summary.unknownFrees;
          break;
        case spool::Kind::Realloc: {
          bool known = t.parked && t.parkedAddress == r.address;
          t.parked = false;
          if (r.a == 0) {  // failed: the old object is still there
            if (known) live.insert(r.address, t.parkedId);
            break;
          }
          endAt(r.a);
          allocate(r.a, known ? writer.realloc(thread, time, t.parkedId, r.b) : writer.malloc(thread, time, r.b));
          break;
        }
        case spool::Kind::Free:
          if (live.erase(r.address, id)) writer.free(thread, time, id);
          else ++summary.unknownFrees;
          break;
        default:
          break;  // decode() accepts only the kinds above
      }
      if (!t.advance(live)) break;
      if (!ready.empty() && later(ti, ready.top())) {
        ready.push(ti);
        break;
      }
    } while (true);
  }
  writer.end();
  summary.events = writer.events();
  summary.objects = writer.objects();
  summary.threads = threads.size();
  summary.bytesWritten = writer.bytesWritten();
  return summary;
}

}  // namespace heapkit::trace
