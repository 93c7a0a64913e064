// mergeSpool: the recorder's per-thread chunks of raw records -> one trace in global order.
#include <algorithm>
#include <cstring>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "heapkit/trace/Convert.h"
#include "heapkit/trace/Spool.h"

namespace heapkit::trace {

namespace {

struct Run {  // a chunk's records
  const spool::Record* records;
  std::uint32_t count;
};

struct ThreadStream {
  std::uint32_t tid;
  std::vector<Run> runs;
  std::size_t run = 0;
  std::uint32_t index = 0;
  bool parked = false;  // a realloc's Release seen, its Realloc not yet
  std::uint64_t parkedId = 0, parkedAddress = 0;
  const spool::Record* current() const { return &runs[run].records[index]; }
  bool advance() {
    if (++index < runs[run].count) return true;
    index = 0;
    while (++run < runs.size())
      if (runs[run].count > 0) return true;
    return false;
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

  // Records are 8-byte aligned in the file (header 40 + command padded), so they are read
  // in place from the mapping.
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
    std::uint64_t whole = (size - offset) / sizeof(spool::Record);
    std::uint32_t count = chunk.count;
    if (count > whole) {  // the process died while this chunk was being written
      summary.truncatedRecords += count - whole;
      count = static_cast<std::uint32_t>(whole);
    }
    auto [it, added] = byTid.try_emplace(chunk.tid, threads.size());
    if (added) threads.push_back(ThreadStream{chunk.tid, {}});
    threads[it->second].runs.push_back({reinterpret_cast<const spool::Record*>(data + offset), count});
    if (chunk.ns > lastNs) {
      lastNs = chunk.ns;
      lastTsc = chunk.tsc;
    }
    offset += std::uint64_t{chunk.count} * sizeof(spool::Record);
  }

  double nsPerTick = lastTsc > header.tsc0 ? static_cast<double>(lastNs - header.ns0) / static_cast<double>(lastTsc - header.tsc0) : 1.0;
  auto toNs = [&](std::uint64_t tsc) -> std::uint64_t {
    return tsc > header.tsc0 ? static_cast<std::uint64_t>(static_cast<double>(tsc - header.tsc0) * nsPerTick) : 0;
  };

  TraceWriter writer(out);
  Header traceHeader;
  traceHeader.pid = header.pid;
  traceHeader.startUnixNs = header.unixNs0;
  traceHeader.command = command;
  traceHeader.source = "record";
  writer.begin(traceHeader);

  // k-way merge on the global sequence number; each thread's records are already in order.
  auto later = [&](std::size_t a, std::size_t b) { return threads[a].current()->seqKind > threads[b].current()->seqKind; };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> ready(later);
  for (std::size_t i = 0; i < threads.size(); ++i) {
    writer.setOsTid(static_cast<std::uint32_t>(i), threads[i].tid);
    ThreadStream& t = threads[i];
    while (t.run < t.runs.size() && t.runs[t.run].count == 0) ++t.run;
    if (t.run < t.runs.size()) ready.push(i);
  }

  AddressMap live;
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
          throw corrupt(static_cast<std::size_t>(reinterpret_cast<const unsigned char*>(&r) - data), "bad record kind");
      }
      if (!t.advance()) break;
      if (!ready.empty() && t.current()->seqKind > threads[ready.top()].current()->seqKind) {
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
