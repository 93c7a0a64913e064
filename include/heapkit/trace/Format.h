// The heapkit trace format (docs/trace-format.md): constants, the decoded event, and the
// variable-length integers both the writer and the reader use.
//
// A trace is a header followed by a stream of records. Each record starts with one varint
// tag = (time delta in ns << 3) | op, so an operation and its time usually cost one or two
// bytes; objects are named by dense ids (the n-th allocation is object n) and frees refer
// to them as a distance back from the newest object, which is small for short-lived ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace heapkit::trace {

// 0x89 makes a 7-bit-clean transfer or a text-mode open visible, as in PNG.
inline constexpr unsigned char kMagic[4] = {0x89, 'H', 'K', 'T'};
inline constexpr std::uint64_t kVersionMajor = 1;  // readers reject any other major version
inline constexpr std::uint64_t kVersionMinor = 0;  // minor versions only append header fields
inline constexpr unsigned kOpBits = 3;
inline constexpr std::size_t kMaxVarintBytes = 10;
inline constexpr unsigned kMaxAlignmentLog2 = 40;  // 1 TiB: anything larger is corruption
// A trace holds only allocations that succeeded, and no 64-bit Linux has a user address
// space larger than 2^56 bytes (x86-64 with five-level page tables): a larger object is
// corruption. The bound also keeps sums of a trace's sizes far from overflowing.
inline constexpr std::uint64_t kMaxObjectBytes = std::uint64_t{1} << 56;

// Record kinds, in the low three bits of every tag. Thread and End are stream structure;
// the reader consumes them and hands out only the memory operations.
enum class Op : std::uint8_t {
  Malloc = 0,   // size
  Calloc = 1,   // size (count * element size)
  Realloc = 2,  // distance back to the old object, new size; the result is a new object
  Aligned = 3,  // log2 alignment, size (memalign, posix_memalign, aligned_alloc, valloc)
  Free = 4,     // distance back to the object
  Thread = 5,   // thread index; a new index is followed by the OS thread id
  End = 6,      // count of memory operations; nothing may follow
};
inline constexpr unsigned kOpCount = 7;

constexpr const char* opName(Op op) {
  switch (op) {
    case Op::Malloc: return "malloc";
    case Op::Calloc: return "calloc";
    case Op::Realloc: return "realloc";
    case Op::Aligned: return "aligned";
    case Op::Free: return "free";
    case Op::Thread: return "thread";
    case Op::End: return "end";
  }
  return "?";
}

constexpr bool allocates(Op op) { return op == Op::Malloc || op == Op::Calloc || op == Op::Realloc || op == Op::Aligned; }

// One memory operation. `id` is the object allocated (or freed); `oldId` is the object a
// realloc replaces. Times are nanoseconds since the start of the trace.
struct Event {
  Op op = Op::Malloc;
  std::uint32_t thread = 0;
  std::uint64_t time = 0;
  std::uint64_t id = 0;
  std::uint64_t oldId = 0;
  std::uint64_t size = 0;
  std::uint64_t alignment = 0;  // Aligned only
};

// One memory operation as a replay applies it (trace/TraceLoop.h): 24 bytes against an
// Event's 48, without thread and time. The replayer decodes a whole trace into these
// before it times anything; the simulator decodes a few hundred at a time.
struct Operation {
  std::uint64_t idOp;   // object id << 8 | Op (ids stay below 2^56: each costs a record)
  std::uint64_t size;
  std::uint64_t extra;  // realloc: the old object's id; aligned: the alignment

  Op op() const { return static_cast<Op>(idOp & 0xff); }
  std::uint64_t id() const { return idOp >> 8; }
  static Operation of(const Event& e) {
    return {e.id << 8 | static_cast<std::uint64_t>(e.op), e.size,
            e.op == Op::Realloc ? e.oldId : e.op == Op::Aligned ? e.alignment : 0};
  }
};

struct Header {
  std::uint64_t versionMajor = kVersionMajor;
  std::uint64_t versionMinor = kVersionMinor;
  std::uint64_t pid = 0;
  std::uint64_t startUnixNs = 0;  // wall-clock time of the first event, 0 if unknown
  std::string command;            // arguments separated by single spaces
  std::string source;             // what produced it: "record", "text", "mtrace", "heaptrack", ...
};

// Unsigned LEB128. Returns the number of bytes written (at most kMaxVarintBytes).
inline std::size_t putVarint(unsigned char* out, std::uint64_t value) {
  std::size_t n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<unsigned char>(value | 0x80);
    value >>= 7;
  }
  out[n++] = static_cast<unsigned char>(value);
  return n;
}

// A varint of four bytes or more, or one near the end of the buffer: returned by value,
// so that callers' variables stay in registers.
struct Varint {
  const unsigned char* next;  // nullptr: truncated, or longer than 64 bits allow
  std::uint64_t value;
};
[[gnu::noinline]] inline Varint getLongVarint(const unsigned char* p, const unsigned char* end) {
  std::uint64_t result = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p >= end) return {nullptr, 0};
    std::uint64_t byte = *p++;
    if (shift == 63 && byte > 1) return {nullptr, 0};  // bits past 64
    result |= (byte & 0x7f) << shift;
    if (byte < 0x80) return {p, result};
  }
  return {nullptr, 0};
}

// Decodes a varint at p, never reading at or past end. Returns the position after it, or
// nullptr if it is truncated or longer than 64 bits allow. Up to three bytes inline
// (sizes, object distances, time deltas): the decoder spends most of its time here.
[[gnu::always_inline]] inline const unsigned char* getVarint(const unsigned char* p, const unsigned char* end,
                                                             std::uint64_t& value) {
  if (p < end && *p < 0x80) [[likely]] {
    value = *p;
    return p + 1;
  }
  if (end - p >= 3) {
    std::uint64_t result = (p[0] & 0x7fu) | (std::uint64_t{p[1] & 0x7fu} << 7);
    if (p[1] < 0x80) {
      value = result;
      return p + 2;
    }
    if (p[2] < 0x80) {
      value = result | (std::uint64_t{p[2]} << 14);
      return p + 3;
    }
  }
  Varint v = getLongVarint(p, end);
  value = v.value;
  return v.next;
}

}  // namespace heapkit::trace
