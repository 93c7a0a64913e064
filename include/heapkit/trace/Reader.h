// TraceDecoder: decodes a heapkit trace held in memory, one memory operation at a time,
// checking everything a replay relies on. Bad input never crashes, hangs or reads out of
// bounds: next() returns false and error() says what is wrong and at which byte offset.
//
//   MappedFile file(path);                   // throws std::runtime_error if unreadable
//   TraceDecoder trace(file.data(), file.size());
//   Event e;
//   while (trace.next(e)) { ... }
//   if (trace.failed()) std::cerr << trace.error() << '\n';
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "heapkit/trace/Format.h"

namespace heapkit::trace {

class TraceDecoder {
 public:
  // With checkLiveness (the default) a free or realloc of an object that is not live is an
  // error; without it only ids that were never allocated are (one bit per object saved).
  TraceDecoder(const unsigned char* data, std::size_t size, bool checkLiveness = true)
      : begin_(data), end_(data + size) {
    cursor_.p = data;
    cursor_.end = data + size;
    cursor_.checkLiveness = checkLiveness;
    readHeader();
  }

  const Header& header() const { return header_; }

  // The next memory operation, or false at the end of the trace or on an error.
  bool next(Event& e) {
    if (done_ || failed_) return false;
    return decode<RuntimeLiveness, false>(cursor_, e);
  }

  // Up to `capacity` operations into `out`; fewer only at the end of the trace or at an
  // error (failed() tells which). The decoder's state stays in registers for the whole
  // batch, where next() must keep it in memory between calls, and the checks that cannot
  // change within a batch are made once: a loop that applies each operation to a heap
  // (whose stores may alias anything) decodes several times faster so.
  std::size_t read(Operation* out, std::size_t capacity) {
    if (done_ || failed_) return 0;
    if (cursor_.checkLiveness)
      return cursor_.threadKnown ? readBatch<CheckLiveness, true>(out, capacity) : readBatch<CheckLiveness, false>(out, capacity);
    return cursor_.threadKnown ? readBatch<NoLiveness, true>(out, capacity) : readBatch<NoLiveness, false>(out, capacity);
  }

  // Up to `capacity` operations of one thread into `out`, and that thread's index into
  // `thread`: a run ends where another thread's operations begin (fewer than `capacity`,
  // then), at the end of the trace or at an error (0 only there: finished() or failed()
  // tells which). A simulator that gives each thread its heap selects it per run.
  std::size_t readRun(Operation* out, std::size_t capacity, std::uint32_t& thread) {
    if (done_ || failed_ || capacity == 0) return 0;
    Cursor c = cursor_;
    std::size_t n = 0;
    // The first operation: after any thread records, which name the run's thread.
    if (c.checkLiveness ? decode<CheckLiveness, false, false>(c, out[0]) : decode<NoLiveness, false, false>(c, out[0])) {
      n = 1;
      thread = c.thread;
      if (c.checkLiveness)
        while (n < capacity && decode<CheckLiveness, true, true>(c, out[n])) ++n;
      else
        while (n < capacity && decode<NoLiveness, true, true>(c, out[n])) ++n;
    }
    cursor_ = c;
    return n;
  }

  bool failed() const { return failed_; }
  bool finished() const { return done_; }  // the end record was read and checked
  const std::string& error() const { return error_; }
  std::uint64_t errorOffset() const { return errorOffset_; }
  std::uint64_t offset() const { return static_cast<std::uint64_t>(cursor_.p - begin_); }
  std::uint64_t size() const { return static_cast<std::uint64_t>(end_ - begin_); }
  std::uint64_t objects() const { return cursor_.nextId; }
  std::uint64_t events() const { return cursor_.events; }
  std::uint64_t time() const { return cursor_.time; }
  const std::vector<std::uint64_t>& osThreadIds() const { return osTids_; }

 private:
  // What decoding one record reads and changes. read() keeps a copy in registers for a
  // whole batch, so nothing here may have its address taken.
  struct Cursor {
    const unsigned char* p = nullptr;
    const unsigned char* end = nullptr;
    std::uint64_t time = 0;
    std::uint64_t nextId = 0;  // the next allocation's object id
    std::uint64_t events = 0;
    std::uint64_t* live = nullptr;  // with checkLiveness: one bit per object, set while it is live
    std::uint64_t liveWords = 0;
    std::uint32_t thread = 0;
    bool threadKnown = false;
    bool checkLiveness = true;
  };

  // The time and thread come as values: reading back a cursor field just written, as part
  // of the copy into an event that may alias it, stalls store forwarding on every record.
  static void put(Event& e, Op op, std::uint64_t id, std::uint64_t size, std::uint64_t extra, std::uint64_t time,
                  std::uint32_t thread) {
    e.op = op;
    e.id = id;
    e.size = size;
    e.alignment = op == Op::Aligned ? extra : 0;
    if (op == Op::Realloc) e.oldId = extra;
    e.thread = thread;
    e.time = time;
  }
  static void put(Operation& o, Op op, std::uint64_t id, std::uint64_t size, std::uint64_t extra, std::uint64_t,
                  std::uint32_t) {
    o.idOp = id << 8 | static_cast<std::uint64_t>(op);
    o.size = size;
    o.extra = extra;
  }

  // Whether frees are checked against the live objects' bits: known for a whole batch, or
  // asked of the cursor.
  struct CheckLiveness {
    static bool on(const Cursor&) { return true; }
  };
  struct NoLiveness {
    static bool on(const Cursor&) { return false; }
  };
  struct RuntimeLiveness {
    static bool on(const Cursor& c) { return c.checkLiveness; }
  };

  template <class Liveness, bool kThreadKnown>
  std::size_t readBatch(Operation* out, std::size_t capacity) {
    Cursor c = cursor_;
    std::size_t n = 0;
    while (n < capacity && decode<Liveness, kThreadKnown>(c, out[n])) ++n;
    cursor_ = c;
    return n;
  }

  // Decodes the memory operation at c.p (after any thread records) into `out`. With
  // kThreadKnown, a thread record has been read: operations need no check for one. With
  // kOneThread, a thread record that names another thread ends the run: it is read (the
  // next run's thread), and false returned without an error.
  template <class Liveness, bool kThreadKnown, bool kOneThread = false, class Out>
  [[gnu::always_inline]] bool decode(Cursor& c, Out& out) {
    for (;;) {
      const unsigned char* record = c.p;
      std::uint64_t tag;
      const unsigned char* q = getVarint(record, c.end, tag);
      if (q == nullptr) [[unlikely]]
        return fail(record, record == c.end ? "truncated: the trace ends without its end record" : "truncated record");
      const std::uint64_t time = c.time + (tag >> kOpBits);
      if (time < c.time) [[unlikely]] return fail(record, "time overflows 64 bits");
      c.time = time;
      const Op op = static_cast<Op>(tag & ((1u << kOpBits) - 1));
      std::uint64_t a, b;
      if (op == Op::Free) [[likely]] {
        if ((q = getVarint(q, c.end, b)) == nullptr) [[unlikely]] return fail(record, "truncated record");
        if (!kThreadKnown && !c.threadKnown) [[unlikely]] return fail(record, "operation before any thread record");
        if (!release<Liveness>(c, record, b, "free")) [[unlikely]] return false;
        put(out, op, c.nextId - 1 - b, 0, 0, time, c.thread);
        ++c.events;
        c.p = q;
        return true;
      }
      if (op <= Op::Calloc) [[likely]] {
        if ((q = getVarint(q, c.end, a)) == nullptr) [[unlikely]] return fail(record, "truncated record");
        if (!kThreadKnown && !c.threadKnown) [[unlikely]] return fail(record, "operation before any thread record");
        b = 0;
      } else if (op == Op::Realloc) {
        if ((q = getVarint(q, c.end, b)) == nullptr || (q = getVarint(q, c.end, a)) == nullptr)
          return fail(record, "truncated record");
        if (!kThreadKnown && !c.threadKnown) return fail(record, "operation before any thread record");
        if (!release<Liveness>(c, record, b, "realloc")) return false;
        b = c.nextId - 1 - b;
      } else if (op == Op::Aligned) {
        if ((q = getVarint(q, c.end, b)) == nullptr || (q = getVarint(q, c.end, a)) == nullptr)
          return fail(record, "truncated record");
        if (!kThreadKnown && !c.threadKnown) return fail(record, "operation before any thread record");
        if (b > kMaxAlignmentLog2) return failAlignment(record, b);
        b = std::uint64_t{1} << b;
      } else if (op == Op::Thread) {
        ThreadRecord thread = threadRecord(record, q, c.end);
        if (thread.next == nullptr) return false;
        const bool switched = thread.index != c.thread;
        c.thread = thread.index;
        c.threadKnown = true;
        c.p = thread.next;
        if (kOneThread && switched) return false;
        continue;
      } else if (op == Op::End) {
        if ((q = getVarint(q, c.end, a)) == nullptr) return fail(record, "truncated record");
        if (a != c.events) return failEndCount(record, a, c.events);
        if (q != c.end) return failTrailing(q);
        c.p = q;
        done_ = true;
        return false;
      } else {
        return failKind(record, static_cast<unsigned>(op));
      }
      // An allocation: a holds its size, b its alignment or old object; the next object id.
      if (a > kMaxObjectBytes) [[unlikely]] return failSize(record, a);
      const std::uint64_t id = c.nextId++;
      if (Liveness::on(c)) {
        if ((id >> 6) >= c.liveWords) [[unlikely]] {
          c.live = growLive();
          c.liveWords = live_.size();
        }
        c.live[id >> 6] |= std::uint64_t{1} << (id & 63);
      }
      put(out, op, id, a, b, time, c.thread);
      ++c.events;
      c.p = q;
      return true;
    }
  }

  // Checks the object `distance` back from the newest and ends its life.
  template <class Liveness>
  [[gnu::always_inline]] bool release(Cursor& c, const unsigned char* record, std::uint64_t distance, const char* what) {
    if (distance >= c.nextId) [[unlikely]] return failUnknown(record, distance, what, c.nextId);
    if (Liveness::on(c)) {
      std::uint64_t id = c.nextId - 1 - distance;
      std::uint64_t word = c.live[id >> 6];
      if (((word >> (id & 63)) & 1) == 0) [[unlikely]] return failFreed(record, id, what);
      c.live[id >> 6] = word & ~(std::uint64_t{1} << (id & 63));
    }
    return true;
  }

  [[gnu::noinline]] std::uint64_t* growLive() {
    live_.resize(live_.empty() ? 1024 : live_.size() * 2, 0);
    return live_.data();
  }

  // A thread record after its tag: the position after it (nullptr on an error) and the index.
  struct ThreadRecord {
    const unsigned char* next;
    std::uint32_t index;
  };
  [[gnu::noinline]] ThreadRecord threadRecord(const unsigned char* record, const unsigned char* q, const unsigned char* end) {
    std::uint64_t a, b;
    if ((q = getVarint(q, end, a)) == nullptr) return {failAt(record, "truncated record"), 0};
    if (a == osTids_.size()) {
      if ((q = getVarint(q, end, b)) == nullptr) return {failAt(record, "truncated record"), 0};
      osTids_.push_back(b);
    } else if (a > osTids_.size()) {
      failThreadOrder(record, a);
      return {nullptr, 0};
    }
    return {q, static_cast<std::uint32_t>(a)};
  }

  void readHeader() {
    if (end_ - cursor_.p < 4 || std::memcmp(cursor_.p, kMagic, 4) != 0) {
      fail(cursor_.p, "not a heapkit trace (bad magic number)");
      return;
    }
    const unsigned char* q = cursor_.p + 4;
    std::uint64_t bodyBytes;
    if ((q = getVarint(q, end_, header_.versionMajor)) == nullptr || (q = getVarint(q, end_, header_.versionMinor)) == nullptr) {
      fail(cursor_.p + 4, "truncated header");
      return;
    }
    if (header_.versionMajor != kVersionMajor) {
      fail(cursor_.p + 4, "unsupported trace format version " + std::to_string(header_.versionMajor) + "." +
                       std::to_string(header_.versionMinor) + " (this reader reads version " +
                       std::to_string(kVersionMajor) + ".x)");
      return;
    }
    const unsigned char* lengthAt = q;
    if ((q = getVarint(q, end_, bodyBytes)) == nullptr || bodyBytes > static_cast<std::uint64_t>(end_ - q)) {
      fail(lengthAt, "truncated header");
      return;
    }
    const unsigned char* bodyEnd = q + bodyBytes;
    if ((q = getVarint(q, bodyEnd, header_.pid)) == nullptr || (q = getVarint(q, bodyEnd, header_.startUnixNs)) == nullptr ||
        (q = getString(q, bodyEnd, header_.command)) == nullptr || (q = getString(q, bodyEnd, header_.source)) == nullptr) {
      fail(lengthAt, "corrupt header");
      return;
    }
    cursor_.p = bodyEnd;  // later minor versions append fields this reader skips
  }

  static const unsigned char* getString(const unsigned char* p, const unsigned char* end, std::string& out) {
    std::uint64_t n;
    if ((p = getVarint(p, end, n)) == nullptr || n > static_cast<std::uint64_t>(end - p)) return nullptr;
    out.assign(reinterpret_cast<const char*>(p), n);
    return p + n;
  }

  // The messages, built out of line: next() stays small enough to inline into a loop.
  [[gnu::cold, gnu::noinline]] bool failUnknown(const unsigned char* record, std::uint64_t distance, const char* what,
                                                std::uint64_t objects) {
    return fail(record, std::string(what) + " of an unknown object (" + std::to_string(distance) +
                            " objects back, but only " + std::to_string(objects) + " were allocated)");
  }
  [[gnu::cold, gnu::noinline]] bool failFreed(const unsigned char* record, std::uint64_t id, const char* what) {
    return fail(record, std::string(what) + " of object " + std::to_string(id) + ", which was already freed");
  }
  [[gnu::cold, gnu::noinline]] bool failSize(const unsigned char* record, std::uint64_t size) {
    return fail(record, "object of " + std::to_string(size) + " bytes, larger than any allocation can be (at most " +
                            std::to_string(kMaxObjectBytes) + ")");
  }
  [[gnu::cold, gnu::noinline]] bool failAlignment(const unsigned char* record, std::uint64_t log2) {
    return fail(record, "alignment 2^" + std::to_string(log2) + " is out of range");
  }
  [[gnu::cold, gnu::noinline]] bool failThreadOrder(const unsigned char* record, std::uint64_t thread) {
    return fail(record, "thread " + std::to_string(thread) + " appears before thread " + std::to_string(osTids_.size()));
  }
  [[gnu::cold, gnu::noinline]] bool failEndCount(const unsigned char* record, std::uint64_t counted, std::uint64_t events) {
    return fail(record, "the end record counts " + std::to_string(counted) + " operations but the trace holds " +
                            std::to_string(events));
  }
  [[gnu::cold, gnu::noinline]] bool failTrailing(const unsigned char* after) {
    return fail(after, std::to_string(end_ - after) + " bytes after the end record");
  }
  [[gnu::cold, gnu::noinline]] bool failKind(const unsigned char* record, unsigned kind) {
    return fail(record, "unknown record kind " + std::to_string(kind));
  }

  [[gnu::cold, gnu::noinline]] bool fail(const unsigned char* at, const char* message) { return fail(at, std::string(message)); }
  [[gnu::cold, gnu::noinline]] const unsigned char* failAt(const unsigned char* at, const char* message) {
    fail(at, message);
    return nullptr;
  }
  [[gnu::cold, gnu::noinline]] bool fail(const unsigned char* at, const std::string& message) {
    if (!failed_) {
      failed_ = true;
      errorOffset_ = static_cast<std::uint64_t>(at - begin_);
      error_ = "offset " + std::to_string(errorOffset_) + ": " + message;
    }
    return false;
  }

  const unsigned char* begin_;
  const unsigned char* end_;
  Cursor cursor_;
  Header header_;
  bool failed_ = false;
  bool done_ = false;
  std::string error_;
  std::uint64_t errorOffset_ = 0;
  std::vector<std::uint64_t> osTids_;
  std::vector<std::uint64_t> live_;
};

// What a checking decoder says is wrong with a trace (its first error, with the offset),
// for a reader that decoded without liveness checks and then met a free of an object that
// was not live; "" if nothing is.
inline std::string firstError(const unsigned char* data, std::size_t size) {
  TraceDecoder decoder(data, size);
  Event e;
  while (decoder.next(e)) {
  }
  return decoder.failed() ? decoder.error() : std::string();
}

// A read-only mapping of a whole file (empty files included).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat refuses it.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error(path + ": " + (S_ISREG(st.st_mode) ? std::strerror(err) : "not a regular file"));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        throw std::runtime_error(path + ": " + std::strerror(err));
      }
      ::madvise(map, size_, MADV_SEQUENTIAL);
      data_ = static_cast<const unsigned char*>(map);
    }
    ::close(fd);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  const unsigned char* data() const { return data_ != nullptr ? data_ : &empty_; }
  std::size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
  unsigned char empty_ = 0;
};

}  // namespace heapkit::trace
