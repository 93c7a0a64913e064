// Hardening against misuse: the policy switch, the per-process secret, and the report.
//
// A composition is hardened when its top heap is wrapped in Hardened<Top> (the preload
// libraries do this). Layers that keep freed objects or object headers ask hardened<Super>()
// and, only then, add their cheap checks (a tag in a freed object's second word, a cookie
// in a header, the in-use bits of boundary tags). Without the wrapper the checks compile
// away, so the DMM simulator's layers do exactly the work they always did.
//
// The report is what glibc does: one line on standard error naming the pointer, then
// abort(). It runs inside malloc, so it uses neither stdio nor malloc nor the C++ runtime:
// write(2) and a hand-formatted hex number.
#pragma once

#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

namespace heapkit {

// Marks a top heap (and so every layer above it) as hardened. Layers inherit the flag
// from their parent, as they inherit SimulatesData.
template <class H>
constexpr bool hardened() {
  if constexpr (requires { H::HardenedAgainstMisuse; }) return H::HardenedAgainstMisuse;
  else return false;
}

// Marks a top heap as secure: hardened, plus the checks that cost more (libheapkit-secure.so,
// as mimalloc's secure mode): canaries around every object checked at free
// (utility/CanaryHeap.h, which HardenedHeap puts under ANSIWrapper), and large blocks with
// guard pages after them, unmapped when freed (combining/LargeObjectHeap.h).
template <class H>
constexpr bool secure() {
  if constexpr (requires { H::SecureAgainstMisuse; }) return H::SecureAgainstMisuse;
  else return false;
}

// A heap whose free refuses, before anything else, every pointer it did not hand out
// (a keyed header checked first: KingsleyHeap's SizeHeap cookie), unaligned ones
// included, names itself as FreeChecksPointers, and HardenedHeap leaves out its own
// alignment test. Layers that pass free straight through (LockedHeap) name themselves
// in turn. A layer that merely inherits the name is not the heap it names, so it does
// not count: a free list over such a heap, which keeps pointers without asking it, keeps
// HardenedHeap's test.
template <class H>
constexpr bool freeChecksPointers() {
  if constexpr (requires { typename H::FreeChecksPointers; }) return std::is_same_v<typename H::FreeChecksPointers, H>;
  else return false;
}

namespace hardening {
inline void ensureSecret();
}

// The secret exists before any layer above can hand out an object.
template <class Top>
struct Hardened : Top {
  static constexpr bool HardenedAgainstMisuse = true;
  template <class... Args>
  explicit Hardened(Args&&... args) : Top(static_cast<Args&&>(args)...) {
    hardening::ensureSecret();
  }
};

// The stronger tier: Hardened, and the layers that read secure<Top>() add their costlier
// checks. Over real memory only (it protects pages).
template <class Top>
struct Secure : Hardened<Top> {
  static constexpr bool SecureAgainstMisuse = true;
  using Hardened<Top>::Hardened;
  // Pages nothing may read or write (a guard after a large block): an overflow into
  // them faults at the faulting instruction. The pages stay part of their block, which
  // Top unmaps whole when it is freed.
  void guardPages(void* pages, std::size_t bytes) { mprotect(pages, bytes, PROT_NONE); }
};

namespace hardening {

// Set once, by the first hardened heap constructed (the preload libraries construct theirs
// before the process's first allocation is served), and never changed after.
inline constinit std::atomic<std::uint64_t> secretValue{0};

inline std::uint64_t secret() { return secretValue.load(std::memory_order_relaxed); }

inline void ensureSecret() {
  if (secret() != 0) return;
  std::uint64_t value = 0;
  if (getrandom(&value, sizeof value, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof value)) {
    // No entropy yet (early boot): the clock and an ASLR'd address still differ per process.
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    value = (static_cast<std::uint64_t>(now.tv_nsec) << 32) ^ static_cast<std::uint64_t>(now.tv_sec) ^
            reinterpret_cast<std::uintptr_t>(&value) ^ 0x9e3779b97f4a7c15u;
  }
  value |= 1;  // never 0, the "not yet set" value
  std::uint64_t expected = 0;
  secretValue.compare_exchange_strong(expected, value, std::memory_order_relaxed);
}

// The tag of the object or header at `address`: the secret mixed with the address, so a
// tag copied from one object to another does not match there.
inline std::uint64_t tagOf(const void* address) { return secret() ^ reinterpret_cast<std::uintptr_t>(address); }

// The second word of a freed object holds its tag while the object is on a free list
// (every object is at least 16 bytes; free lists link through the first word).
inline std::uint64_t& secondWord(void* object) { return static_cast<std::uint64_t*>(object)[1]; }

// "heapkit: <what> 0x<pointer>\n" on standard error, then SIGABRT.
[[noreturn, gnu::cold, gnu::noinline]] inline void report(const char* what, const void* pointer) {
  char line[160];
  std::size_t length = 0;
  for (const char* s = "heapkit: "; *s != '\0'; ++s) line[length++] = *s;
  for (const char* s = what; *s != '\0' && length < 120; ++s) line[length++] = *s;
  line[length++] = ' ';
  line[length++] = '0';
  line[length++] = 'x';
  auto value = reinterpret_cast<std::uintptr_t>(pointer);
  int digits = 1;
  while (digits < 16 && (value >> (4 * digits)) != 0) ++digits;
  for (int i = digits - 1; i >= 0; --i) line[length++] = "0123456789abcdef"[(value >> (4 * i)) & 15];
  line[length++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, length);
  (void)ignored;
  abort();
}

[[noreturn]] inline void doubleFree(const void* pointer) { report("free(): double free of", pointer); }
[[noreturn]] inline void invalidPointer(const void* pointer) { report("free(): invalid pointer", pointer); }
[[noreturn]] inline void overflowAfter(const void* pointer) { report("free(): heap overflow after the block at", pointer); }
[[noreturn]] inline void badHeader(const void* pointer) { report("free(): invalid pointer or underflow before", pointer); }
[[noreturn]] inline void writeAfterFree(const void* pointer) { report("malloc(): write after free to", pointer); }
[[noreturn]] inline void corruptFreeList(const void* where) { report("corrupted free list at", where); }

// The same reports for the inline paths, as `return reportX(p);` in a function that
// returns nothing: declared to return (and opaque to the optimiser, which would otherwise
// find that they do not), so that the compiler jumps to them. A call to a noreturn
// function needs the stack aligned for it, which costs every free two instructions on
// its fast path (a stack adjustment in and out) whether or not the check fails.
[[gnu::cold, gnu::noipa]] inline void reportDoubleFree(const void* pointer) { doubleFree(pointer); }
[[gnu::cold, gnu::noipa]] inline void reportInvalidPointer(const void* pointer) { invalidPointer(pointer); }
[[gnu::cold, gnu::noipa]] inline void reportBadHeader(const void* pointer) { badHeader(pointer); }
[[gnu::cold, gnu::noipa]] inline void reportOverflowAfter(const void* pointer) { overflowAfter(pointer); }

// The tag a free list writes into a freed object's second word: nine times its address
// plus an odd constant, one lea from the register that holds the pointer (the secret's
// load and xor were two instructions on every free). It differs from object to object, so
// a tag copied to another object does not match there, and no correct program stores it:
// it is odd (no aligned pointer), and about nine times a heap address, so beyond the user
// address range where heaps lie in its top eight ninths (mmap's, at 0x7f... on x86-64),
// and elsewhere beyond any heap smaller than eight times its own address. A program that
// wanted to hide a double free would write anything else there, so a secret adds nothing;
// header cookies, which stop pointers a program made up, keep it. ScalableHeap's
// superblock lists have a tag of their own, the superblock header's address, confirmed
// on the lists when it matches (building/Superblock.h); Kingsley's lists keep their mark
// in SizeHeap's cookie instead (objectrep/SizeHeap.h).
inline std::uint64_t freedTag(const void* object) { return 9 * reinterpret_cast<std::uintptr_t>(object) + 0x5bd1e995u; }

// The checks a free list makes: a freed object that already carries its tag is freed a
// second time (a live object holds it only if the program copied it there from this very
// object's freed memory).
inline void checkNotFreed(void* object) {
  if (secondWord(object) == freedTag(object)) [[unlikely]] doubleFree(object);
}
inline void tagFreed(void* object) { secondWord(object) = freedTag(object); }
inline void checkAndTagFreed(void* object) {
  std::uint64_t tag = freedTag(object);
  if (secondWord(object) == tag) [[unlikely]] doubleFree(object);
  secondWord(object) = tag;
}
// Handed out again: no longer freed.
inline void untagAllocated(void* object) { secondWord(object) = 0; }

// Secure: the words of a freed object after its link and tag hold a fill derived from the
// tag (so from the secret and the address, without reading the secret again); a write
// after free changes it, which malloc finds when it hands the object out again
// (mimalloc's secure mode checks its free lists' encoding instead).
inline std::uint64_t freedFill(std::uint64_t tag, std::size_t word) { return tag ^ (0xf5f5f5f5f5f5f5f5u + word); }
inline void fillFreed(void* object, std::size_t words) {
  auto* word = static_cast<std::uint64_t*>(object);
  for (std::size_t i = 2; i < 2 + words; ++i) word[i] = freedFill(word[1], i);
}
// `object` holds its tag: it was freed.
inline void checkFreedFill(void* object, std::size_t words) {
  auto* word = static_cast<std::uint64_t*>(object);
  for (std::size_t i = 2; i < 2 + words; ++i)
    if (word[i] != freedFill(word[1], i)) [[unlikely]] writeAfterFree(&word[i]);
}

}  // namespace hardening
}  // namespace heapkit
