// TraceWriter: encodes memory operations into the heapkit trace format as they happen.
// Object ids are handed out here (the n-th allocation is object n); callers that start
// from addresses map them with OpenAddressingMap (heapkit/trace/OpenAddressingMap.h).
//
//   TraceWriter out(file);               // any std::FILE*, or a std::string via TraceWriter(&s)
//   out.begin(header);
//   auto a = out.malloc(/*thread*/ 0, /*time ns*/ 10, 24);
//   out.free(0, 20, a);
//   out.end();                           // without it, readers report the trace truncated
#pragma once

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "heapkit/trace/Format.h"

namespace heapkit::trace {

class TraceWriter {
 public:
  // Callers number threads densely (the merge) or nearly so (imported logs); the tables
  // indexed by the number must not take gigabytes for one absurd number in a log.
  static constexpr std::uint32_t kMaxThreadNumber = (1u << 22) - 1;  // Linux's largest pid_max
  static void checkThreadNumber(std::uint32_t thread) {
    if (thread > kMaxThreadNumber)
      throw std::invalid_argument("thread number " + std::to_string(thread) + " is too large (at most " +
                                  std::to_string(kMaxThreadNumber) + ")");
  }

  explicit TraceWriter(std::FILE* file) : file_(file), buffer_(kBufferBytes) {}
  explicit TraceWriter(std::string* memory) : memory_(memory), buffer_(kBufferBytes) {}
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter() { flushBuffer(); }

  void begin(const Header& header) {
    std::string body;
    appendVarint(body, header.pid);
    appendVarint(body, header.startUnixNs);
    appendString(body, header.command);
    appendString(body, header.source);
    putBytes(kMagic, 4);
    put(kVersionMajor);
    put(kVersionMinor);
    put(body.size());
    putBytes(body.data(), body.size());
  }

  std::uint64_t malloc(std::uint32_t thread, std::uint64_t time, std::uint64_t size) {
    tag(thread, time, Op::Malloc);
    put(size);
    return allocated();
  }

  std::uint64_t calloc(std::uint32_t thread, std::uint64_t time, std::uint64_t size) {
    tag(thread, time, Op::Calloc);
    put(size);
    return allocated();
  }

  std::uint64_t aligned(std::uint32_t thread, std::uint64_t time, std::uint64_t alignment, std::uint64_t size) {
    if (!std::has_single_bit(alignment) || std::countr_zero(alignment) > static_cast<int>(kMaxAlignmentLog2))
      throw std::invalid_argument("alignment must be a power of two up to 2^40");
    tag(thread, time, Op::Aligned);
    put(static_cast<std::uint64_t>(std::countr_zero(alignment)));
    put(size);
    return allocated();
  }

  // The old object ends and a new one begins, even where the allocator resized in place:
  // the trace describes requests, not what an allocator did with them.
  std::uint64_t realloc(std::uint32_t thread, std::uint64_t time, std::uint64_t oldId, std::uint64_t size) {
    checkId(oldId);
    tag(thread, time, Op::Realloc);
    put(nextId_ - 1 - oldId);
    put(size);
    return allocated();
  }

  void free(std::uint32_t thread, std::uint64_t time, std::uint64_t id) {
    checkId(id);
    tag(thread, time, Op::Free);
    put(nextId_ - 1 - id);
    ++events_;
  }

  void end() {
    put((std::uint64_t{0} << kOpBits) | static_cast<unsigned>(Op::End));
    put(events_);
    flushBuffer();
  }

  std::uint64_t objects() const { return nextId_; }
  std::uint64_t events() const { return events_; }
  std::uint64_t bytesWritten() const { return written_ + used_; }

 private:
  static constexpr std::size_t kBufferBytes = 1 << 16;

  void checkId(std::uint64_t id) const {
    if (id >= nextId_) throw std::invalid_argument("object id " + std::to_string(id) + " was never allocated");
  }

  // Times must not go backwards: the delta is unsigned. Sources whose clocks disagree a
  // little (threads on different cores) are clamped to the latest time seen.
  void tag(std::uint32_t thread, std::uint64_t time, Op op) {
    if (!threadKnown_ || thread != thread_) switchThread(thread);
    std::uint64_t delta = time > time_ ? time - time_ : 0;
    if (time > time_) time_ = time;
    if (delta > (UINT64_MAX >> kOpBits)) delta = UINT64_MAX >> kOpBits;
    put((delta << kOpBits) | static_cast<unsigned>(op));
  }

  // Threads are numbered densely in the trace in order of first appearance, whatever
  // numbers the caller uses; a new one is announced with its OS thread id.
  void switchThread(std::uint32_t thread) {
    checkThreadNumber(thread);
    put(static_cast<unsigned>(Op::Thread));
    if (thread >= mapping_.size()) mapping_.resize(std::size_t{thread} + 1, UINT32_MAX);
    if (mapping_[thread] == UINT32_MAX) {
      mapping_[thread] = threadsSeen_;
      put(threadsSeen_++);
      put(osTids_.size() > thread ? osTids_[thread] : thread);
    } else {
      put(mapping_[thread]);
    }
    thread_ = thread;
    threadKnown_ = true;
  }

 public:
  // The OS thread id to record for a caller's thread number (default: the number itself).
  void setOsTid(std::uint32_t thread, std::uint64_t osTid) {
    checkThreadNumber(thread);
    if (osTids_.size() <= thread) osTids_.resize(thread + 1, 0);
    osTids_[thread] = osTid;
  }

 private:
  std::uint64_t allocated() {
    ++events_;
    return nextId_++;
  }

  // Straight into the buffer: one varint per call, on the path of every event.
  void put(std::uint64_t value) {
    if (used_ + kMaxVarintBytes > buffer_.size()) [[unlikely]] flushBuffer();
    used_ += putVarint(buffer_.data() + used_, value);
  }

  void putBytes(const void* bytes, std::size_t count) {
    const auto* from = static_cast<const unsigned char*>(bytes);
    while (count > 0) {
      if (used_ == buffer_.size()) flushBuffer();
      std::size_t n = std::min(count, buffer_.size() - used_);
      std::memcpy(buffer_.data() + used_, from, n);
      used_ += n;
      from += n;
      count -= n;
    }
  }

  static void appendVarint(std::string& out, std::uint64_t value) {
    unsigned char bytes[kMaxVarintBytes];
    out.append(reinterpret_cast<const char*>(bytes), putVarint(bytes, value));
  }
  static void appendString(std::string& out, const std::string& s) {
    appendVarint(out, s.size());
    out += s;
  }

  void flushBuffer() {
    if (used_ == 0) return;
    std::size_t bytes = used_;
    used_ = 0;
    if (memory_ != nullptr) {
      memory_->append(reinterpret_cast<const char*>(buffer_.data()), bytes);
    } else if (std::fwrite(buffer_.data(), 1, bytes, file_) != bytes) {
      throw std::runtime_error(std::string("cannot write the trace: ") + std::strerror(errno));
    }
    written_ += bytes;
  }

  std::FILE* file_ = nullptr;
  std::string* memory_ = nullptr;
  std::vector<unsigned char> buffer_;  // kBufferBytes, of which used_ are filled
  std::size_t used_ = 0;
  std::uint64_t written_ = 0;
  std::uint64_t nextId_ = 0;
  std::uint64_t events_ = 0;
  std::uint64_t time_ = 0;
  std::uint32_t thread_ = 0;
  bool threadKnown_ = false;  // every trace names its thread before the first operation
  std::uint32_t threadsSeen_ = 0;
  std::vector<std::uint32_t> mapping_;
  std::vector<std::uint64_t> osTids_;
};

}  // namespace heapkit::trace
