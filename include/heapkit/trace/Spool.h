// The recorder's spool: what the preloaded recorder writes while the program runs, before
// `heapkit record` turns it into a trace (mergeSpool in heapkit/trace/Convert.h).
//
// Recording must cost the program as little as possible, so each thread appends records
// with raw addresses, delta-encoded in whole bytes (3 to 5 bytes each), to its own buffer
// and writes whole chunks with one write(2) on an O_APPEND file; the work of ordering threads by a global sequence number and of
// turning addresses into dense object ids is done afterwards. A crash loses only the
// records still in buffers; a chunk cut short by a kill is read up to its last whole record.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "heapkit/trace/Format.h"

namespace heapkit::trace::spool {

inline constexpr char kMagic[8] = {'H', 'K', 'S', 'P', 'O', 'O', 'L', '2'};  // 2: whole-byte records, chunk sequence bases

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
// taken at each flush lets the merge convert ticks to nanoseconds. A thread's sequence
// numbers run on from chunk to chunk: seqBase is the one before the chunk's first record.
struct ChunkHeader {
  std::uint32_t magic;  // kChunkMagic
  std::uint32_t tid;
  std::uint32_t count;
  std::uint32_t bytes;
  std::uint64_t tsc;
  std::uint64_t ns;
  std::uint64_t seqBase;
};
inline constexpr std::uint32_t kChunkMagic = 0x324b4843;  // "CHK2"

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

static_assert(sizeof(FileHeader) == 40 && sizeof(ChunkHeader) == 40 && sizeof(Record) == 40);

// Encoding, relative to the previous record of the same chunk (the state starts at
// {seqBase, 0, 0} in every chunk, so chunks decode on their own). It is built for the
// recorder's hot path:
// field lengths are whole bytes, so a field is one unaligned 8-byte store and a length
// from a count of leading zeros, with no loop and no branch per byte.
//
//   byte 0: kind (bits 0-2) | stamped (bit 3) | explicit sequence (bit 4)
//           | address bytes - 1 (bits 5-7)
//   byte 1, only for kinds with a value (all but Free and Release): value bytes - 1
//   address: zigzag(address - previous address), little-endian, in its byte count
//   value, if any: Malloc/Calloc/Aligned: the size; Realloc: zigzag(new - old address)
//   sequence delta, varint, if explicit (otherwise it is 1, as it is for every record of a
//           thread that runs alone)
//   tsc delta, varint, if stamped (otherwise the record has the previous record's time:
//           the recorder reads the clock only now and then)
//   Aligned: the alignment; Realloc: the size, varints.
struct CodecState {
  std::uint64_t seq = 0, tsc = 0, address = 0;
};

// Room a record needs in the buffer, including what the 8-byte stores write past its end.
inline constexpr std::size_t kMaxRecordBytes = 2 + 8 + 8 + 3 * kMaxVarintBytes;

inline constexpr unsigned kStampedBit = 8, kExplicitSequenceBit = 16;

inline constexpr bool hasValue(Kind kind) { return kind != Kind::Free && kind != Kind::Release; }
inline constexpr bool hasExtra(Kind kind) { return kind == Kind::Aligned || kind == Kind::Realloc; }

inline std::uint64_t zigzag(std::uint64_t delta) {
  return (delta << 1) ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(delta) >> 63);
}
inline std::uint64_t unzigzag(std::uint64_t v) { return (v >> 1) ^ (0 - (v & 1)); }

// 0 to 7: the bytes that hold v, less one (0 takes one byte), as the header stores it.
// (63 ^ clz is 63 - clz for clz in [0, 63], and compiles to a single bsr on x86.)
inline unsigned lengthCode(std::uint64_t v) { return static_cast<unsigned>(63 ^ __builtin_clzll(v | 1)) >> 3; }

inline void store64(unsigned char* p, std::uint64_t v) {
  if constexpr (std::endian::native != std::endian::little) v = __builtin_bswap64(v);
  __builtin_memcpy(p, &v, 8);  // inlined even where -fno-builtin (the preload libraries) forbids memcpy's
}

// Encodes one record at p (which must have kMaxRecordBytes of room) and returns its end.
// `stamped` says whether `tsc` is a new clock reading; a reading behind the previous one
// (a thread moved to a core whose clock lags) is clamped to it.
template <Kind kind>
inline unsigned char* encodeRecord(unsigned char* p, CodecState& s, std::uint64_t seq, bool stamped, std::uint64_t tsc,
                                   std::uint64_t address, std::uint64_t value = 0, std::uint64_t extra = 0) {
  // Everything read from the state is read before the first store: p may alias it as far
  // as the compiler knows, and a caller that passes seq = s.seq + 1 lets it drop the test.
  const std::uint64_t seqDelta = seq - s.seq, previousTsc = s.tsc;
  const std::uint64_t addressField = zigzag(address - s.address);
  const unsigned addressCode = lengthCode(addressField);
  unsigned header = static_cast<unsigned>(kind) | addressCode << 5;
  unsigned char* q = p + 1;
  std::uint64_t valueField = 0;
  unsigned valueCode = 0;
  if constexpr (hasValue(kind)) {
    valueField = kind == Kind::Realloc ? zigzag(value - address) : value;
    valueCode = lengthCode(valueField);
    *q++ = static_cast<unsigned char>(valueCode);
  }
  store64(q, addressField);
  q += addressCode + 1;
  if constexpr (hasValue(kind)) {
    store64(q, valueField);
    q += valueCode + 1;
  }
  if (seqDelta != 1) [[unlikely]] {
    header |= kExplicitSequenceBit;
    q += putVarint(q, seqDelta);
  }
  if (stamped) {
    if (tsc < previousTsc) tsc = previousTsc;
    header |= kStampedBit;
    q += putVarint(q, tsc - previousTsc);
    s.tsc = tsc;
  }
  if constexpr (hasExtra(kind)) q += putVarint(q, extra);
  *p = static_cast<unsigned char>(header);
  s.seq = seq;
  s.address = address;
  return q;
}

// The same for a Record (tests, tools): stamped where its time differs from the state's.
inline unsigned char* encode(unsigned char* p, const Record& r, CodecState& s) {
  std::uint64_t seq = r.seqKind >> 8;
  bool stamped = r.tsc > s.tsc;
  switch (static_cast<Kind>(r.seqKind & 0xff)) {
    case Kind::Malloc: return encodeRecord<Kind::Malloc>(p, s, seq, stamped, r.tsc, r.address, r.a);
    case Kind::Calloc: return encodeRecord<Kind::Calloc>(p, s, seq, stamped, r.tsc, r.address, r.a);
    case Kind::Realloc: return encodeRecord<Kind::Realloc>(p, s, seq, stamped, r.tsc, r.address, r.a, r.b);
    case Kind::Aligned: return encodeRecord<Kind::Aligned>(p, s, seq, stamped, r.tsc, r.address, r.a, r.b);
    case Kind::Free: return encodeRecord<Kind::Free>(p, s, seq, stamped, r.tsc, r.address);
    case Kind::Release: return encodeRecord<Kind::Release>(p, s, seq, stamped, r.tsc, r.address);
  }
  return p;
}

// A little-endian field of `bytes` bytes at p, never reading at or past end.
inline const unsigned char* getBytes(const unsigned char* p, const unsigned char* end, unsigned bytes, std::uint64_t& value) {
  if (static_cast<std::size_t>(end - p) < bytes) return nullptr;
  value = 0;
  for (unsigned i = 0; i < bytes; ++i) value |= std::uint64_t{p[i]} << (8 * i);
  return p + bytes;
}

// Returns the position after the record, or nullptr if it is truncated or malformed.
inline const unsigned char* decode(const unsigned char* p, const unsigned char* end, Record& r, CodecState& s) {
  if (p >= end) return nullptr;
  unsigned header = *p++;
  Kind kind = static_cast<Kind>(header & 7);
  if ((header & 7) > static_cast<unsigned>(Kind::Release)) return nullptr;
  unsigned valueBytes = 0;
  if (hasValue(kind)) {
    if (p >= end || *p > 7) return nullptr;
    valueBytes = *p++ + 1u;
  }
  std::uint64_t addressField, valueField = 0, seqDelta = 1, tscDelta = 0, extra = 0;
  if ((p = getBytes(p, end, (header >> 5) + 1, addressField)) == nullptr) return nullptr;
  if (hasValue(kind) && (p = getBytes(p, end, valueBytes, valueField)) == nullptr) return nullptr;
  if ((header & kExplicitSequenceBit) && (p = getVarint(p, end, seqDelta)) == nullptr) return nullptr;
  if ((header & kStampedBit) && (p = getVarint(p, end, tscDelta)) == nullptr) return nullptr;
  if (hasExtra(kind) && (p = getVarint(p, end, extra)) == nullptr) return nullptr;
  std::uint64_t seq = s.seq + seqDelta;
  std::uint64_t address = s.address + unzigzag(addressField);
  r = {seq << 8 | static_cast<std::uint64_t>(kind), s.tsc + tscDelta, address, valueField, extra};
  if (kind == Kind::Realloc) r.a = address + unzigzag(valueField);
  s = {seq, r.tsc, address};
  return p;
}

}  // namespace heapkit::trace::spool
