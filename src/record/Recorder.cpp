// The trace recorder: a provider of the wrapper's entry points (src/wrapper/) that forwards
// every request to the next malloc in the process (glibc's, or whichever library follows
// in the search order) and logs it to the spool (heapkit/trace/Spool.h). `heapkit record`
// preloads libheapkit-record.so with HEAPKIT_RECORD_DIR set and merges the spools into
// traces afterwards; without HEAPKIT_RECORD_DIR the library forwards and records nothing.
//
// Cost per operation: a few stores of a delta-encoded record (3 to 5 bytes) into a
// per-thread buffer, an increment of the global order (a locked one only once the process
// has a second thread), and a clock reading on every 16th operation of a thread; a full
// buffer goes to the file with one writev(2).
//
// What is written survives the process: buffers are flushed at thread exit, exit(),
// _exit(), exec*() and on crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT); after a
// signal that ends the process otherwise (SIGKILL, or a SIGTERM or SIGINT the program
// does not handle) the spool holds every full chunk.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "heapkit/trace/Spool.h"
#include "heapkit_entry_points.h"

namespace {

namespace spool = heapkit::trace::spool;

// ---- the next allocator ---------------------------------------------------------------

using MallocFn = void* (*)(size_t);
using FreeFn = void (*)(void*);
using CallocFn = void* (*)(size_t, size_t);
using ReallocFn = void* (*)(void*, size_t);
using MemalignFn = void* (*)(size_t, size_t);
using UsableFn = size_t (*)(void*);

MallocFn nextMalloc;
FreeFn nextFree;
CallocFn nextCalloc;
ReallocFn nextRealloc;
MemalignFn nextMemalign;
UsableFn nextUsableSize;

// ---- clocks -------------------------------------------------------------------------------

inline std::uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
#endif
}

std::uint64_t nowNs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
}

// ---- per-thread buffers ---------------------------------------------------------------------

constexpr std::size_t kChunkBytes = 128 * 1024;

struct Buffer {
  unsigned char* cursor;  // where the next record goes: bytes[0, cursor) holds `count` records
  unsigned char* limit;   // a record that ends past this flushes the buffer
  std::uint32_t count;
  std::uint32_t tid;
  Buffer* next;  // in the registry of live buffers
  spool::CodecState state;  // state.seq: the thread's latest sequence number
  std::uint64_t chunkSeqBase;  // state.seq before the chunk's first record
  unsigned char bytes[kChunkBytes];
};

// Marks a thread whose buffer was released at thread exit: its last few operations (in
// other TLS destructors) are written one at a time.
Buffer* const kReleased = reinterpret_cast<Buffer*>(1);

std::atomic<int> spoolFd{-1};
// After the library's destructor has run, every record is written at once: nothing
// would flush a buffer later.
std::atomic<bool> unbuffered{false};
std::atomic<std::uint64_t> sequence{0};
pthread_key_t threadKey;
std::atomic_flag registryLock = ATOMIC_FLAG_INIT;
Buffer* registry = nullptr;    // every live buffer, for flushes at exit, exec and crashes
Buffer* freeBuffers = nullptr;  // buffers of threads that ended, for reuse
unsigned threadsSeen = 0;       // threads that got a buffer, under the registry lock

__attribute__((tls_model("initial-exec"))) thread_local Buffer* threadBuffer = nullptr;
// Set while the recorder itself runs, so allocations it causes are not recorded.
__attribute__((tls_model("initial-exec"))) thread_local bool busy = false;

void lockRegistry() {
  while (registryLock.test_and_set(std::memory_order_acquire)) sched_yield();
}
void unlockRegistry() { registryLock.clear(std::memory_order_release); }

// Async-signal-safe: write(2) and clock_gettime only.
void writeChunk(std::uint32_t tid, const unsigned char* bytes, std::uint32_t used, std::uint32_t count, std::uint64_t seqBase) {
  int fd = spoolFd.load(std::memory_order_relaxed);
  if (fd < 0 || count == 0) return;
  spool::ChunkHeader header{spool::kChunkMagic, tid, count, used, ticks(), nowNs(CLOCK_MONOTONIC), seqBase};
  struct iovec parts[2] = {{&header, sizeof header}, {const_cast<unsigned char*>(bytes), used}};
  // O_APPEND makes each writev land whole at the end of the file, whatever other threads
  // write at the same time.
  while (writev(fd, parts, 2) < 0 && errno == EINTR) {
  }
}

// Room for a record must remain below the limit; after the library's destructor has run,
// every record is written at once: nothing would flush a buffer later.
unsigned char* limitOf(Buffer* buffer) {
  return unbuffered.load(std::memory_order_relaxed) ? buffer->bytes : buffer->bytes + kChunkBytes - spool::kMaxRecordBytes;
}

void resetBuffer(Buffer* buffer) {
  buffer->cursor = buffer->bytes;
  buffer->limit = limitOf(buffer);
  buffer->count = 0;
  buffer->state = {buffer->state.seq, 0, 0};  // every chunk decodes on its own
  buffer->chunkSeqBase = buffer->state.seq;
}

void flush(Buffer* buffer) {
  std::uint32_t count = buffer->count, used = static_cast<std::uint32_t>(buffer->cursor - buffer->bytes);
  std::uint64_t seqBase = buffer->chunkSeqBase;
  resetBuffer(buffer);
  writeChunk(buffer->tid, buffer->bytes, used, count, seqBase);
}

void flushAll() {
  for (Buffer* b = registry; b != nullptr; b = b->next) flush(b);
}

// The global order. While the process has one thread, its records are numbered by the
// thread's own count (state.seq + 1: no shared counter, no test in the encoder); a locked
// fetch_add on the shared counter (about 20 cycles, and a barrier that waits for the
// record's stores) is needed only once a second thread exists. pthread_create switches
// before the thread starts, so the new thread sees the switch from its first record; a
// thread started some other way (clone, glibc's internal helpers) switches when it gets
// its buffer, and records the first thread makes in that instant may share a number with
// the new thread's, which the merge orders by thread.
std::atomic<bool> multiThreaded{false};

// Under the registry lock: the shared counter continues after every number a thread used.
void becomeMultiThreaded() {
  if (multiThreaded.load(std::memory_order_relaxed)) return;
  std::uint64_t latest = 0;
  for (Buffer* b = registry; b != nullptr; b = b->next) latest = std::max(latest, b->state.seq);
  sequence.store(latest + 1, std::memory_order_relaxed);
  multiThreaded.store(true, std::memory_order_relaxed);
}

Buffer* newBuffer() {
  lockRegistry();
  Buffer* buffer = freeBuffers;
  if (buffer != nullptr) freeBuffers = buffer->next;
  unlockRegistry();
  if (buffer == nullptr) {
    void* memory = mmap(nullptr, sizeof(Buffer), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return nullptr;
    buffer = static_cast<Buffer*>(memory);
  }
  buffer->state = {};
  resetBuffer(buffer);
  buffer->tid = static_cast<std::uint32_t>(syscall(SYS_gettid));
  lockRegistry();
  if (++threadsSeen > 1) becomeMultiThreaded();
  buffer->next = registry;
  registry = buffer;
  unlockRegistry();
  pthread_setspecific(threadKey, buffer);  // for the flush at thread exit
  return buffer;
}

void threadEnded(void* value) {
  auto* buffer = static_cast<Buffer*>(value);
  flush(buffer);
  lockRegistry();
  for (Buffer** link = &registry; *link != nullptr; link = &(*link)->next) {
    if (*link == buffer) {
      *link = buffer->next;
      break;
    }
  }
  buffer->next = freeBuffers;
  freeBuffers = buffer;
  unlockRegistry();
  threadBuffer = kReleased;
}

// Reading the clock is the largest cost of a record where rdtsc is trapped (about 30 ns on
// some virtual machines), so a thread reads it for every timeEvery-th record and the
// records between carry the last reading (HEAPKIT_RECORD_TIME_EVERY, a power of two,
// default 16; 1 reads it every time). The order of records never depends on it: that is the sequence number.
std::uint32_t timeMask = 15;  // timeEvery - 1, a power of two less one: no division here

template <spool::Kind kind>
void log(std::uint64_t address, std::uint64_t value, std::uint64_t extra);

// The first record of a thread, and records after its buffer was released at thread exit.
template <spool::Kind kind>
__attribute__((noinline)) void logWithoutBuffer(std::uint64_t address, std::uint64_t value, std::uint64_t extra) {
  if (threadBuffer == kReleased) {
    unsigned char bytes[spool::kMaxRecordBytes];
    spool::CodecState state;
    lockRegistry();
    becomeMultiThreaded();  // this thread has no count of its own any more
    unlockRegistry();
    std::uint64_t seq = sequence.fetch_add(1, std::memory_order_relaxed);
    auto used = static_cast<std::uint32_t>(spool::encodeRecord<kind>(bytes, state, seq, true, ticks(), address, value, extra) - bytes);
    writeChunk(static_cast<std::uint32_t>(syscall(SYS_gettid)), bytes, used, 1, 0);
    return;
  }
  busy = true;
  threadBuffer = newBuffer();
  busy = false;
  if (threadBuffer != nullptr) log<kind>(address, value, extra);
}

// Kept apart from logWithoutBuffer, whose stack frame would cost every call of a process
// that records nothing.
template <spool::Kind kind>
__attribute__((noinline)) void logSlow(std::uint64_t address, std::uint64_t value, std::uint64_t extra) {
  if (busy || spoolFd.load(std::memory_order_relaxed) < 0) return;
  logWithoutBuffer<kind>(address, value, extra);
}

// Appends one record to the thread's buffer: a few stores, no lock, no atomic
// read-modify-write while the process has one thread, the clock on every 16th record.
// Everything unusual (no buffer yet, not recording, the recorder's own calls) takes the
// one test of the buffer pointer in log() to logSlow.
template <spool::Kind kind, bool stamped>
inline void appendRecord(Buffer* buffer, std::uint64_t seq, std::uint64_t address, std::uint64_t value, std::uint64_t extra) {
  unsigned char* end = spool::encodeRecord<kind>(buffer->cursor, buffer->state, seq, stamped, stamped ? ticks() : 0,
                                                 address, value, extra);
  // The cursor and count are stored after the record, so a flush from a signal handler
  // sees only whole records.
  std::atomic_signal_fence(std::memory_order_release);
  buffer->cursor = end;
  ++buffer->count;
  if (end > buffer->limit) [[unlikely]] flush(buffer);
}

// Out of line: the clock reading and its varint would take registers the common path
// then has to save.
template <spool::Kind kind>
__attribute__((noinline)) void appendStamped(Buffer* buffer, std::uint64_t seq, std::uint64_t address, std::uint64_t value,
                                             std::uint64_t extra) {
  appendRecord<kind, true>(buffer, seq, address, value, extra);
}

template <spool::Kind kind>
inline void append(Buffer* buffer, std::uint64_t seq, std::uint64_t address, std::uint64_t value, std::uint64_t extra) {
  if ((buffer->count & timeMask) == 0) [[unlikely]]  // and so every chunk's first record
    appendStamped<kind>(buffer, seq, address, value, extra);
  else
    appendRecord<kind, false>(buffer, seq, address, value, extra);
}

// Numbered from the shared counter, once the process has more than one thread.
template <spool::Kind kind>
__attribute__((noinline)) void appendNumbered(Buffer* buffer, std::uint64_t address, std::uint64_t value, std::uint64_t extra) {
  append<kind>(buffer, sequence.fetch_add(1, std::memory_order_relaxed), address, value, extra);
}

template <spool::Kind kind>
inline void log(std::uint64_t address, std::uint64_t value, std::uint64_t extra) {
  Buffer* buffer = threadBuffer;
  if (reinterpret_cast<std::uintptr_t>(buffer) <= reinterpret_cast<std::uintptr_t>(kReleased)) [[unlikely]] {
    logSlow<kind>(address, value, extra);
    return;
  }
  // One thread: the number is the thread's own next, which the encoder needs not write.
  if (!multiThreaded.load(std::memory_order_relaxed)) [[likely]]
    append<kind>(buffer, buffer->state.seq + 1, address, value, extra);
  else
    appendNumbered<kind>(buffer, address, value, extra);
}

// The allocating entry points end in a tail call of this: it returns what the allocator
// returned, so the entry point keeps nothing alive across it, and it runs on the
// registers a call may clobber, with no saves on its common path.
// Without a spool (no HEAPKIT_RECORD_DIR) every call still goes to logSlow and back: a
// test of a global here would be cheaper then, but would cost every recorded call.
template <spool::Kind kind>
__attribute__((noinline)) void* logAllocation(void* ptr, std::uint64_t size, std::uint64_t extra) {
  if (ptr != nullptr) log<kind>(reinterpret_cast<std::uintptr_t>(ptr), size, extra);
  return ptr;
}

__attribute__((noinline)) void logFree(void* ptr) { log<spool::Kind::Free>(reinterpret_cast<std::uintptr_t>(ptr), 0, 0); }

inline bool recording() { return !busy && spoolFd.load(std::memory_order_relaxed) >= 0; }

// ---- the spool file ---------------------------------------------------------------------

// Opens <HEAPKIT_RECORD_DIR>/<pid>-<n>.spool, n counting process images (exec) of one pid.
void openSpool() {
  const char* dir = getenv("HEAPKIT_RECORD_DIR");
  if (dir == nullptr || *dir == '\0') return;
  int pid = static_cast<int>(getpid());
  char path[4096];
  int fd = -1;
  for (int n = 0; n < 10000 && fd < 0; ++n) {
    if (snprintf(path, sizeof path, "%s/%d-%d.spool", dir, pid, n) >= static_cast<int>(sizeof path)) return;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return;
  }
  if (fd < 0) return;

  static char command[4096];
  std::uint32_t commandBytes = 0;
  int cmdline = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (cmdline >= 0) {
    ssize_t n;
    while (commandBytes < sizeof command && (n = read(cmdline, command + commandBytes, sizeof command - commandBytes)) > 0)
      commandBytes += static_cast<std::uint32_t>(n);
    close(cmdline);
  }
  spool::FileHeader header{};
  memcpy(header.magic, spool::kMagic, sizeof header.magic);
  header.pid = static_cast<std::uint32_t>(pid);
  header.commandBytes = commandBytes;
  header.tsc0 = ticks();
  header.ns0 = nowNs(CLOCK_MONOTONIC);
  header.unixNs0 = nowNs(CLOCK_REALTIME);
  static const char padding[8] = {};
  struct iovec parts[3] = {{&header, sizeof header}, {command, commandBytes}, {const_cast<char*>(padding), (8 - commandBytes % 8) % 8}};
  if (writev(fd, parts, 3) < 0) {
    close(fd);
    return;
  }
  spoolFd.store(fd, std::memory_order_relaxed);
}

// ---- fatal signals --------------------------------------------------------------------------

// Only the crashes. A handler is visible to the program: on SIGINT, SIGTERM, SIGHUP or
// SIGQUIT one makes Python believe a foreign handler is installed, so it installs no
// KeyboardInterrupt handler and its multiprocessing forkserver cannot restore the
// handlers it saved (every worker dies, and the pool respawns them forever).
const int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

void onFatalSignal(int signal) {
  flushAll();  // best effort: the process is going down
  // SA_RESETHAND restored the default action: re-raise so the exit status is the signal's.
  raise(signal);
}

void installSignalHandlers() {
  for (int signal : kFatalSignals) {
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;  // the program's own
    struct sigaction action {};
    action.sa_handler = onFatalSignal;
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, nullptr);
  }
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
PthreadCreateFn nextPthreadCreate;

__attribute__((destructor)) void atExit() {
  unbuffered.store(true, std::memory_order_relaxed);
  lockRegistry();
  for (Buffer* b = registry; b != nullptr; b = b->next) b->limit = b->bytes;
  unlockRegistry();
  flushAll();
}

}  // namespace

// ---- entry points (heapkit_entry_points.h) -----------------------------------------------

extern "C" {

void heapkit_ep_init(void) {
  nextMalloc = next<MallocFn>("malloc");
  nextFree = next<FreeFn>("free");
  nextCalloc = next<CallocFn>("calloc");
  nextRealloc = next<ReallocFn>("realloc");
  nextMemalign = next<MemalignFn>("memalign");
  nextUsableSize = next<UsableFn>("malloc_usable_size");
  nextPthreadCreate = next<PthreadCreateFn>("pthread_create");
  pthread_key_create(&threadKey, threadEnded);
  if (const char* every = getenv("HEAPKIT_RECORD_TIME_EVERY")) {
    long n = strtol(every, nullptr, 10);
    if (n >= 1 && n <= 65536) timeMask = std::bit_ceil(static_cast<std::uint32_t>(n)) - 1;
  }
  openSpool();
  if (spoolFd.load() >= 0) installSignalHandlers();
}

void* heapkit_ep_malloc(size_t size) { return logAllocation<spool::Kind::Malloc>(nextMalloc(size), size, 0); }

void* heapkit_ep_calloc(size_t count, size_t size) {
  return logAllocation<spool::Kind::Calloc>(nextCalloc(count, size), count * size, 0);
}

void* heapkit_ep_memalign(size_t alignment, size_t size) {
  return logAllocation<spool::Kind::Aligned>(nextMemalign(alignment, size), size, alignment);
}

void heapkit_ep_free(void* ptr) {
  // Numbered before the memory is released: another thread may get this address next.
  logFree(ptr);
  nextFree(ptr);
}

void* heapkit_ep_realloc(void* ptr, size_t size) {
  if (!recording()) return nextRealloc(ptr, size);
  auto old = reinterpret_cast<std::uintptr_t>(ptr);
  log<spool::Kind::Release>(old, 0, 0);
  void* moved = nextRealloc(ptr, size);
  log<spool::Kind::Realloc>(old, reinterpret_cast<std::uintptr_t>(moved), size);
  return moved;
}

size_t heapkit_ep_usable_size(void* ptr) { return nextUsableSize(ptr); }

void heapkit_ep_fork_prepare(void) { lockRegistry(); }

void heapkit_ep_fork_parent(void) { unlockRegistry(); }

// The child records into a spool of its own. Records buffered before the fork belong to
// the parent, which writes them; the other threads' buffers have no thread here.
void heapkit_ep_fork_child(void) {
  Buffer* mine = threadBuffer;
  for (Buffer* b = registry; b != nullptr;) {
    Buffer* following = b->next;
    if (b != mine) munmap(b, sizeof(Buffer));
    b = following;
  }
  registry = nullptr;
  freeBuffers = nullptr;
  threadsSeen = 0;
  multiThreaded.store(false, std::memory_order_relaxed);  // the child has one thread: its own count numbers it
  if (mine != nullptr && mine != kReleased) {
    threadsSeen = 1;
    resetBuffer(mine);
    mine->tid = static_cast<std::uint32_t>(syscall(SYS_gettid));
    mine->next = nullptr;
    registry = mine;
  }
  unlockRegistry();
  int fd = spoolFd.exchange(-1);
  if (fd >= 0) {
    close(fd);
    openSpool();
  }
}

// ---- exec and _exit: flush first, since neither runs destructors ---------------------------

#pragma GCC visibility push(default)

// A second thread makes the global order need an atomic increment (nextSequence()).
int pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*), void* argument) {
  lockRegistry();
  becomeMultiThreaded();
  unlockRegistry();
  PthreadCreateFn create = nextPthreadCreate;
  if (create == nullptr) create = next<PthreadCreateFn>("pthread_create");  // before the wrapper's first call
  return create(thread, attributes, start, argument);
}

int execve(const char* path, char* const argv[], char* const envp[]) {
  flushAll();
  return next<int (*)(const char*, char* const*, char* const*)>("execve")(path, argv, envp);
}

int execv(const char* path, char* const argv[]) {
  flushAll();
  return next<int (*)(const char*, char* const*)>("execv")(path, argv);
}

int execvp(const char* file, char* const argv[]) {
  flushAll();
  return next<int (*)(const char*, char* const*)>("execvp")(file, argv);
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  flushAll();
  return next<int (*)(const char*, char* const*, char* const*)>("execvpe")(file, argv, envp);
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  flushAll();
  return next<int (*)(int, char* const*, char* const*)>("fexecve")(fd, argv, envp);
}

// The execl family takes its arguments inline; gather them and use the vector forms.
#define HEAPKIT_GATHER_ARGS(first, extra)                 \
  va_list args;                                           \
  va_start(args, first);                                  \
  int count = 1;                                          \
  {                                                       \
    va_list counting;                                     \
    va_copy(counting, args);                              \
    while (va_arg(counting, char*) != nullptr) ++count;   \
    va_end(counting);                                     \
  }                                                       \
  char** argv = static_cast<char**>(__builtin_alloca((count + 1) * sizeof(char*))); \
  argv[0] = const_cast<char*>(first);                     \
  for (int i = 1; i <= count; ++i) argv[i] = va_arg(args, char*); \
  extra;                                                  \
  va_end(args)

int execl(const char* path, const char* arg, ...) {
  HEAPKIT_GATHER_ARGS(arg, (void)0);
  return execv(path, argv);
}

int execlp(const char* file, const char* arg, ...) {
  HEAPKIT_GATHER_ARGS(arg, (void)0);
  return execvp(file, argv);
}

int execle(const char* path, const char* arg, ...) {
  char** envp;
  HEAPKIT_GATHER_ARGS(arg, envp = va_arg(args, char**));
  return execve(path, argv, envp);
}

void _exit(int status) {
  flushAll();
  next<void (*)(int)>("_exit")(status);
  __builtin_unreachable();
}

void _Exit(int status) {
  flushAll();
  next<void (*)(int)>("_Exit")(status);
  __builtin_unreachable();
}

#pragma GCC visibility pop

}  // extern "C"

// The malloc family in this translation unit, so that it calls the entry points above
// directly, inlined, rather than through a call into another object file. The wrapper
// tests the optional (weak) entry points for presence; here they are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Waddress"
#include "wrapper.cpp"
#pragma GCC diagnostic pop
