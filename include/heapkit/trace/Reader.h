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
      : begin_(data), p_(data), end_(data + size), checkLiveness_(checkLiveness) {
    readHeader();
  }

  const Header& header() const { return header_; }

  // The next memory operation, or false at the end of the trace or on an error.
  bool next(Event& e) {
    if (done_ || failed_) return false;
    for (;;) {
      const unsigned char* record = p_;
      std::uint64_t tag;
      const unsigned char* q = getVarint(p_, end_, tag);
      if (q == nullptr) [[unlikely]]
        return fail(record, p_ == end_ ? "truncated: the trace ends without its end record" : "truncated record");
      std::uint64_t delta = tag >> kOpBits;
      if (delta > UINT64_MAX - time_) [[unlikely]] return fail(record, "time overflows 64 bits");
      // Kept in locals and stored once: reading back a field just written (time_, nextId_)
      // as part of a wider copy into the event stalls store forwarding on every record.
      const std::uint64_t time = time_ + delta;
      time_ = time;
      Op op = static_cast<Op>(tag & ((1u << kOpBits) - 1));
      std::uint64_t a, b;
      switch (op) {
        case Op::Malloc:
        case Op::Calloc:
          if ((q = getVarint(q, end_, a)) == nullptr) [[unlikely]] return fail(record, "truncated record");
          if (!threadKnown_) [[unlikely]] return fail(record, "operation before any thread record");
          e.op = op;
          e.size = a;
          e.alignment = 0;
          break;
        case Op::Aligned:
          if ((q = getVarint(q, end_, b)) == nullptr || (q = getVarint(q, end_, a)) == nullptr)
            return fail(record, "truncated record");
          if (!threadKnown_) return fail(record, "operation before any thread record");
          if (b > kMaxAlignmentLog2) return failAlignment(record, b);
          e.op = op;
          e.size = a;
          e.alignment = std::uint64_t{1} << b;
          break;
        case Op::Realloc:
          if ((q = getVarint(q, end_, b)) == nullptr || (q = getVarint(q, end_, a)) == nullptr)
            return fail(record, "truncated record");
          if (!threadKnown_) return fail(record, "operation before any thread record");
          if (!release(record, b, "realloc", e.oldId)) return false;
          e.op = op;
          e.size = a;
          e.alignment = 0;
          break;
        case Op::Free:
          if ((q = getVarint(q, end_, b)) == nullptr) [[unlikely]] return fail(record, "truncated record");
          if (!threadKnown_) [[unlikely]] return fail(record, "operation before any thread record");
          if (!release(record, b, "free", e.id)) [[unlikely]] return false;
          e.op = op;
          e.size = 0;
          e.thread = thread_;
          e.time = time;
          ++events_;
          p_ = q;
          return true;
        case Op::Thread:
          if ((q = getVarint(q, end_, a)) == nullptr) return fail(record, "truncated record");
          if (a == osTids_.size()) {
            if ((q = getVarint(q, end_, b)) == nullptr) return fail(record, "truncated record");
            osTids_.push_back(b);
          } else if (a > osTids_.size()) {
            return failThreadOrder(record, a);
          }
          thread_ = static_cast<std::uint32_t>(a);
          threadKnown_ = true;
          p_ = q;
          continue;
        case Op::End:
          if ((q = getVarint(q, end_, a)) == nullptr) return fail(record, "truncated record");
          if (a != events_) return failEndCount(record, a);
          if (q != end_) return failTrailing(q);
          p_ = q;
          done_ = true;
          return false;
        default:
          return failKind(record, static_cast<unsigned>(op));
      }
      // An allocation (a holds its size): the next object id.
      if (a > kMaxObjectBytes) [[unlikely]] return failSize(record, a);
      const std::uint64_t id = nextId_;
      nextId_ = id + 1;
      if (checkLiveness_) {
        if ((id & 63) == 0) live_.push_back(0);
        live_[id >> 6] |= std::uint64_t{1} << (id & 63);
      }
      e.id = id;
      e.thread = thread_;
      e.time = time;
      ++events_;
      p_ = q;
      return true;
    }
  }

  bool failed() const { return failed_; }
  bool finished() const { return done_; }  // the end record was read and checked
  const std::string& error() const { return error_; }
  std::uint64_t errorOffset() const { return errorOffset_; }
  std::uint64_t offset() const { return static_cast<std::uint64_t>(p_ - begin_); }
  std::uint64_t size() const { return static_cast<std::uint64_t>(end_ - begin_); }
  std::uint64_t objects() const { return nextId_; }
  std::uint64_t events() const { return events_; }
  std::uint64_t time() const { return time_; }
  const std::vector<std::uint64_t>& osThreadIds() const { return osTids_; }

 private:
  void readHeader() {
    if (end_ - p_ < 4 || std::memcmp(p_, kMagic, 4) != 0) {
      fail(p_, "not a heapkit trace (bad magic number)");
      return;
    }
    const unsigned char* q = p_ + 4;
    std::uint64_t bodyBytes;
    if ((q = getVarint(q, end_, header_.versionMajor)) == nullptr || (q = getVarint(q, end_, header_.versionMinor)) == nullptr) {
      fail(p_ + 4, "truncated header");
      return;
    }
    if (header_.versionMajor != kVersionMajor) {
      fail(p_ + 4, "unsupported trace format version " + std::to_string(header_.versionMajor) + "." +
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
    p_ = bodyEnd;  // later minor versions append fields this reader skips
  }

  static const unsigned char* getString(const unsigned char* p, const unsigned char* end, std::string& out) {
    std::uint64_t n;
    if ((p = getVarint(p, end, n)) == nullptr || n > static_cast<std::uint64_t>(end - p)) return nullptr;
    out.assign(reinterpret_cast<const char*>(p), n);
    return p + n;
  }

  // Resolves a distance back to an object id and ends that object's life.
  bool release(const unsigned char* record, std::uint64_t distance, const char* what, std::uint64_t& id) {
    if (distance >= nextId_) [[unlikely]] return failUnknown(record, distance, what);
    id = nextId_ - 1 - distance;
    if (checkLiveness_) {
      std::uint64_t& word = live_[id >> 6];
      std::uint64_t bit = std::uint64_t{1} << (id & 63);
      if ((word & bit) == 0) [[unlikely]] return failFreed(record, id, what);
      word &= ~bit;
    }
    return true;
  }

  // The messages, built out of line: next() stays small enough to inline into a loop.
  [[gnu::cold, gnu::noinline]] bool failUnknown(const unsigned char* record, std::uint64_t distance, const char* what) {
    return fail(record, std::string(what) + " of an unknown object (" + std::to_string(distance) +
                            " objects back, but only " + std::to_string(nextId_) + " were allocated)");
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
  [[gnu::cold, gnu::noinline]] bool failEndCount(const unsigned char* record, std::uint64_t counted) {
    return fail(record, "the end record counts " + std::to_string(counted) + " operations but the trace holds " +
                            std::to_string(events_));
  }
  [[gnu::cold, gnu::noinline]] bool failTrailing(const unsigned char* after) {
    return fail(after, std::to_string(end_ - after) + " bytes after the end record");
  }
  [[gnu::cold, gnu::noinline]] bool failKind(const unsigned char* record, unsigned kind) {
    return fail(record, "unknown record kind " + std::to_string(kind));
  }

  [[gnu::cold, gnu::noinline]] bool fail(const unsigned char* at, const char* message) { return fail(at, std::string(message)); }
  [[gnu::cold, gnu::noinline]] bool fail(const unsigned char* at, const std::string& message) {
    if (!failed_) {
      failed_ = true;
      errorOffset_ = static_cast<std::uint64_t>(at - begin_);
      error_ = "offset " + std::to_string(errorOffset_) + ": " + message;
    }
    return false;
  }

  const unsigned char* begin_;
  const unsigned char* p_;
  const unsigned char* end_;
  bool checkLiveness_;
  Header header_;
  bool failed_ = false;
  bool done_ = false;
  bool threadKnown_ = false;
  std::string error_;
  std::uint64_t errorOffset_ = 0;
  std::uint64_t time_ = 0;
  std::uint64_t nextId_ = 0;
  std::uint64_t events_ = 0;
  std::uint32_t thread_ = 0;
  std::vector<std::uint64_t> osTids_;
  std::vector<std::uint64_t> live_;
};

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
