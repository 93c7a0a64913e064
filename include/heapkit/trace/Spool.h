// The recorder's spool: what the preloaded recorder writes while the program runs, before
// `heapkit record` turns it into a trace (mergeSpool in heapkit/trace/Convert.h).
//
// Recording must cost the program as little as possible, so each thread appends records
// with raw addresses, delta- and varint-encoded (about 8 bytes each), to its own buffer
// and writes whole chunks with one write(2) on an O_APPEND file; the work of ordering threads by a global sequence number and of
// turning addresses into dense object ids is done afterwards. A crash loses only the
// records still in buffers; a chunk cut short by a kill is read up to its last whole record.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/trace/Format.h"

namespace heapkit::trace::spool {

inline constexpr char kMagic[8] = {'H', 'K', 'S', 'P', 'O', 'O', 'L', '1'};

// A realloc is two records: Release (the old address, numbered before the call, since the
// allocator may hand that address to another thread as soon as it is released) and
// Realloc (numbered after the call, when the new address is known). The merge joins them.
enum class Kind : std::uint8_t { Malloc, Calloc, Realloc, Aligned, Free, Release };

// File header, followed by `commandBytes` bytes of /proc/self/cmdline.
struct FileHeader {
  char magic[8];
  std::uint32_t pid;
  std::uint32_t commandBytes;
  std::uint64_t tsc0;     // clock reading at start (TSC ticks on x86, else ns)
  std::uint64_t ns0;      // CLOCK_MONOTONIC at start
  std::uint64_t unixNs0;  // CLOCK_REALTIME at start
};

// Chunk header, followed by `bytes` bytes that encode `count` records. The (tsc, ns) pair
// taken at each flush lets the merge convert ticks to nanoseconds.
struct ChunkHeader {
  std::uint32_t magic;  // kChunkMagic
  std::uint32_t tid;
  std::uint32_t count;
  std::uint32_t bytes;
  std::uint64_t tsc;
  std::uint64_t ns;
};
inline constexpr std::uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"

// seqKind: global sequence number << 8 | Kind. The sequence orders events across threads:
// a free takes its number before the memory is released, an allocation after it is
// obtained, so an address is always freed before the merge sees it handed out again.
struct Record {
  std::uint64_t seqKind;
  std::uint64_t tsc;
  std::uint64_t address;  // the object: the result of an allocation, the old one for Release/Realloc
  std::uint64_t a;        // size; Realloc: the new address (0 if the realloc failed)
  std::uint64_t b;        // Realloc: the size; Aligned: the alignment
};

static_assert(sizeof(FileHeader) == 40 && sizeof(ChunkHeader) == 32 && sizeof(Record) == 40);

// Encoding, relative to the previous record of the same chunk (the state starts at zero in
// every chunk, so chunks decode on their own):
//   varint (sequence delta << 3 | kind), varint tsc delta, varint zigzag(address delta),
//   then Malloc/Calloc: size; Aligned: size, alignment; Realloc: zigzag(new - old), size.
struct CodecState {
  std::uint64_t seq = 0, tsc = 0, address = 0;
};
inline constexpr std::size_t kMaxRecordBytes = 6 * kMaxVarintBytes;

inline std::uint64_t zigzag(std::uint64_t delta) {
  return (delta << 1) ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(delta) >> 63);
}
inline std::uint64_t unzigzag(std::uint64_t v) { return (v >> 1) ^ (0 - (v & 1)); }

inline unsigned char* encode(unsigned char* p, const Record& r, CodecState& s) {
  std::uint64_t seq = r.seqKind >> 8;
  Kind kind = static_cast<Kind>(r.seqKind & 0xff);
  std::uint64_t tsc = r.tsc > s.tsc ? r.tsc : s.tsc;  // a thread moved to a core whose clock lags
  p += putVarint(p, ((seq - s.seq) << 3) | static_cast<std::uint64_t>(kind));
  p += putVarint(p, tsc - s.tsc);
  p += putVarint(p, zigzag(r.address - s.address));
  switch (kind) {
    case Kind::Malloc:
    case Kind::Calloc: p += putVarint(p, r.a); break;
    case Kind::Aligned:
      p += putVarint(p, r.a);
      p += putVarint(p, r.b);
      break;
    case Kind::Realloc:
      p += putVarint(p, zigzag(r.a - r.address));
      p += putVarint(p, r.b);
      break;
    default: break;
  }
  s = {seq, tsc, r.address};
  return p;
}

// Returns the position after the record, or nullptr if it is truncated or malformed.
inline const unsigned char* decode(const unsigned char* p, const unsigned char* end, Record& r, CodecState& s) {
  std::uint64_t v0, tscDelta, addressDelta, x = 0, y = 0;
  if ((p = getVarint(p, end, v0)) == nullptr || (p = getVarint(p, end, tscDelta)) == nullptr ||
      (p = getVarint(p, end, addressDelta)) == nullptr)
    return nullptr;
  Kind kind = static_cast<Kind>(v0 & 7);
  switch (kind) {
    case Kind::Malloc:
    case Kind::Calloc:
      if ((p = getVarint(p, end, x)) == nullptr) return nullptr;
      break;
    case Kind::Aligned:
    case Kind::Realloc:
      if ((p = getVarint(p, end, x)) == nullptr || (p = getVarint(p, end, y)) == nullptr) return nullptr;
      break;
    case Kind::Free:
    case Kind::Release: break;
    default: return nullptr;
  }
  std::uint64_t seq = s.seq + (v0 >> 3);
  std::uint64_t address = s.address + unzigzag(addressDelta);
  r = {seq << 8 | static_cast<std::uint64_t>(kind), s.tsc + tscDelta, address, x, y};
  if (kind == Kind::Realloc) r.a = address + unzigzag(x);
  s = {seq, r.tsc, address};
  return p;
}

}  // namespace heapkit::trace::spool
