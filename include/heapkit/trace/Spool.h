// The recorder's spool: what the preloaded recorder writes while the program runs, before
// `heapkit record` turns it into a trace (mergeSpool in heapkit/trace/Convert.h).
//
// Recording must cost the program as little as possible, so each thread appends fixed-size
// records with raw addresses to its own buffer and writes whole chunks with one write(2)
// on an O_APPEND file; the work of ordering threads by a global sequence number and of
// turning addresses into dense object ids is done afterwards. A crash loses only the
// records still in buffers; a chunk cut short by a kill is read up to its last whole record.
#pragma once

#include <cstdint>

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

// Chunk header, followed by `count` records. The (tsc, ns) pair taken at each flush lets
// the merge convert ticks to nanoseconds.
struct ChunkHeader {
  std::uint32_t magic;  // kChunkMagic
  std::uint32_t tid;
  std::uint32_t count;
  std::uint32_t reserved;
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

}  // namespace heapkit::trace::spool
