/* One misuse of the malloc family per case, each run in a child process: the parent
 * checks how the child ended and, for heapkit's libraries, that its standard error holds
 * the one-line report naming the exact pointer.
 *
 *   heapkit_misuse <case> <expected>
 *     Runs the case in a child under the allocator the process has (LD_PRELOAD).
 *     <expected>: a phrase of heapkit's report ("double free of", "invalid pointer",
 *     "heap overflow after", "underflow before", "write after free"): SIGABRT and a line
 *     "heapkit: ... <phrase> ... <pointer>"; or "SIGSEGV" (a fault: a guard page, an
 *     unmapped block); or "glibc" (SIGABRT with glibc's own message: the recorder
 *     forwards to glibc); or "survives" (the case must exit normally).
 *
 *   heapkit_misuse --table <name>=<library>... (an empty library: glibc's malloc)
 *     Runs every case under each library (a child with LD_PRELOAD) and prints a markdown
 *     table: "abort" (SIGABRT, with the heapkit line naming the pointer for heapkit's
 *     libraries), "fault" (SIGSEGV or SIGBUS), "-" (not stopped). Exits 1 when the last
 *     library stops fewer cases than the first.
 *
 * Sized cases are <kind>-<size>: small 24 B, medium 100 KiB, large 4 MiB; overflow and
 * underflow by n write n bytes of 0x42 (by 1: XOR the byte with 0x42, so that it
 * changes) just after the requested size or just before the pointer, then free it; a write
 * after free writes the first 16 bytes of the freed block, then allocates and frees two
 * blocks of its size. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
void heapkit_misuse_delete_twice(int pointerFd); /* delete_twice.cpp */

static int pointerFd = -1;

/* Tells the parent which pointer the misuse passes. */
void heapkit_misuse_announce(const void* pointer) {
  char line[64];
  int length = snprintf(line, sizeof line, "%#lx\n", (unsigned long)(uintptr_t)pointer);
  if (write(pointerFd, line, (size_t)length) != length) _exit(3);
}

/* The compiler must not see through malloc/free (it may drop a pair, or warn). */
static void* (*volatile mallocOf)(size_t) = malloc;
static void (*volatile freeOf)(void*) = free;

static void doubleFree(size_t size) {
  char* p = mallocOf(size);
  memset(p, 1, size);
  heapkit_misuse_announce(p);
  freeOf(p);
  freeOf(p);
}

/* The sequence: three owners of one block if the second free goes unnoticed. */
static void doubleFreeThenReuse(void) {
  void* p = mallocOf(8);
  heapkit_misuse_announce(p);
  freeOf(p);
  freeOf(p);
  void* a = mallocOf(8);
  void* b = mallocOf(8);
  void* c = mallocOf(8);
  if (a == b || b == c || a == c) fprintf(stderr, "three mallocs returned one block\n");
  _exit(0);
}

static void freeStack(void) {
  _Alignas(16) uint64_t words[8] = {0};
  heapkit_misuse_announce(&words[2]);
  freeOf(&words[2]);
}

/* 64 KiB-aligned, so that a heap masking the pointer to a 64 KiB boundary reads this
 * program's own (mapped) data, not a page that may not exist. */
static _Alignas(65536) char staticBuffer[3 * 65536];
static void freeStatic(void) {
  char* p = staticBuffer + 65536 + 8192 + 48;
  heapkit_misuse_announce(p);
  freeOf(p);
}

/* A pointer glibc's own malloc handed out, 100 KB into glibc's heap (so a 64 KiB mask
 * stays inside it). */
static void freeGlibcPointer(void) {
  void* first = __libc_malloc(100000);
  char* p = __libc_malloc(64);
  if (first == NULL || p == NULL) _exit(4);
  heapkit_misuse_announce(p);
  freeOf(p);
}

/* Application data before an interior pointer, as any real object holds. */
static void freeInterior(size_t size, size_t offset) {
  char* p = mallocOf(size);
  memset(p, 0x41, size);
  heapkit_misuse_announce(p + offset);
  freeOf(p + offset);
}

static void* freeInThread(void* pointer) {
  freeOf(pointer);
  return NULL;
}

/* An interior pointer freed by another thread than the one that allocated it. */
static void remoteInterior(void) {
  char* p = mallocOf(64);
  memset(p, 0x41, 64);
  heapkit_misuse_announce(p + 16);
  pthread_t thread;
  if (pthread_create(&thread, NULL, freeInThread, p + 16) != 0) _exit(5);
  pthread_join(thread, NULL);
}

/* Freed by its owner, then by another thread. */
static void remoteDoubleFree(void) {
  void* p = mallocOf(64);
  heapkit_misuse_announce(p);
  freeOf(p);
  pthread_t thread;
  if (pthread_create(&thread, NULL, freeInThread, p) != 0) _exit(5);
  pthread_join(thread, NULL);
}

/* Freed by two other threads, one after the other. */
static void remoteRemoteDoubleFree(void) {
  void* p = mallocOf(64);
  heapkit_misuse_announce(p);
  for (int i = 0; i < 2; ++i) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, freeInThread, p) != 0) _exit(5);
    pthread_join(thread, NULL);
  }
}

/* Writes through a pointer the compiler cannot reason about (out of bounds on purpose). */
static void* (*volatile setOf)(void*, int, size_t) = memset;

static const char* const kinds[] = {"double-free",  "invalid-free", "unaligned-free", "overflow-1",      "overflow-32",
                                    "underflow-1",  "underflow-32", "write-after-free", "overflow-1m"};
static const char* const sizes[] = {"small", "medium", "large"};
static const size_t sizeBytes[] = {24, 100 * 1024, 4 * 1024 * 1024};

static int misuseSized(const char* kind, size_t size) {
  char* p = mallocOf(size);
  if (p == NULL) _exit(4);
  memset(p, 0x41, size);
  if (strcmp(kind, "double-free") == 0) {
    heapkit_misuse_announce(p);
    freeOf(p);
    freeOf(p);
  } else if (strcmp(kind, "invalid-free") == 0) {
    heapkit_misuse_announce(p + 16);
    freeOf(p + 16);
  } else if (strcmp(kind, "unaligned-free") == 0) {
    heapkit_misuse_announce(p + 8);
    freeOf(p + 8);
  } else if (strncmp(kind, "overflow-", 9) == 0 || strncmp(kind, "underflow-", 10) == 0) {
    const char* amount = strchr(kind, '-') + 1;
    size_t bytes = strcmp(amount, "1m") == 0 ? (size_t)1 << 20 : (size_t)strtoul(amount, NULL, 10);
    heapkit_misuse_announce(p);
    char* first = kind[0] == 'o' ? p + size : p - bytes;
    if (bytes == 1) {
      /* The byte is XORed with 0x42, so it changes: written as 0x42, it missed, 1 run in
       * 256, the canary byte that happened to equal it (a write of the byte already there
       * changes nothing a check could see). A zero byte becomes 0x42 as before. Longer
       * writes are 0x42s: 32 of them never all equal what they overwrite. */
      volatile char* written = first;
      *written = (char)(*written ^ 0x42);
    } else {
      setOf(first, 0x42, bytes);
    }
    freeOf(p);
  } else if (strcmp(kind, "write-after-free") == 0) {
    heapkit_misuse_announce(p);
    freeOf(p);
    setOf(p, 0x42, 16);
    char* a = mallocOf(size);
    char* b = mallocOf(size);
    freeOf(a);
    freeOf(b);
  } else {
    return 2;
  }
  return 0;
}

/* "overflow-32-small" -> kind "overflow-32", size 24. */
static int runSized(const char* name) {
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; ++k) {
    size_t length = strlen(kinds[k]);
    if (strncmp(name, kinds[k], length) != 0 || name[length] != '-') continue;
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; ++z)
      if (strcmp(name + length + 1, sizes[z]) == 0) return misuseSized(kinds[k], sizeBytes[z]);
  }
  return 2;
}

/* Every path a correct program takes keeps working (the control: must survive). */
static void correctUse(void) {
  void* blocks[64];
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 64; ++i) blocks[i] = mallocOf((size_t)(8 << (i % 16)));
    for (int i = 0; i < 64; i += 2) freeOf(blocks[i]);
    for (int i = 1; i < 64; i += 2) blocks[i] = realloc(blocks[i], (size_t)(24 << (i % 14)));
    for (int i = 1; i < 64; i += 2) freeOf(blocks[i]);
  }
  void* aligned = NULL;
  if (posix_memalign(&aligned, 4096, 100) != 0) _exit(6);
  freeOf(aligned);
  pthread_t thread;
  void* p = mallocOf(64);
  if (pthread_create(&thread, NULL, freeInThread, p) != 0) _exit(5);
  pthread_join(thread, NULL);
}

static int runCase(const char* name) {
  if (strcmp(name, "double-free-8") == 0) doubleFree(8);
  else if (strcmp(name, "double-free-4k") == 0) doubleFree(4096);
  else if (strcmp(name, "double-free-100k") == 0) doubleFree(100 * 1000);
  else if (strcmp(name, "double-free-256k") == 0) doubleFree(256 * 1024);
  else if (strcmp(name, "double-free-reuse") == 0) doubleFreeThenReuse();
  else if (strcmp(name, "foreign-stack") == 0) freeStack();
  else if (strcmp(name, "foreign-static") == 0) freeStatic();
  else if (strcmp(name, "foreign-glibc") == 0) freeGlibcPointer();
  else if (strcmp(name, "interior-small") == 0) freeInterior(64, 16);
  else if (strcmp(name, "interior-medium") == 0) freeInterior(4096, 1024);
  else if (strcmp(name, "interior-large") == 0) freeInterior(256 * 1024, 4096);
  else if (strcmp(name, "interior-remote") == 0) remoteInterior();
  else if (strcmp(name, "unaligned") == 0) freeInterior(64, 8);
  else if (strcmp(name, "remote-double-free") == 0) remoteDoubleFree();
  else if (strcmp(name, "remote-remote-double-free") == 0) remoteRemoteDoubleFree();
  else if (strcmp(name, "delete-twice") == 0) heapkit_misuse_delete_twice(pointerFd);
  else if (strcmp(name, "correct-use") == 0) correctUse();
  else return runSized(name);
  return 0;
}

/* The cases of the table: the sized ones (overflow-1m only for large blocks), then the rest. */
static const char* const otherCases[] = {"double-free-8", "double-free-4k", "double-free-100k", "double-free-256k",
                                         "double-free-reuse", "remote-double-free", "remote-remote-double-free",
                                         "delete-twice", "foreign-stack", "foreign-static", "foreign-glibc",
                                         "interior-small", "interior-medium", "interior-large", "interior-remote",
                                         "unaligned"};

static size_t readAll(int fd, char* buffer, size_t capacity) {
  size_t used = 0;
  ssize_t got;
  while (used + 1 < capacity && (got = read(fd, buffer + used, capacity - 1 - used)) > 0) used += (size_t)got;
  buffer[used] = '\0';
  return used;
}

/* How one child ended. */
struct Outcome {
  int status;
  char pointer[64];
  char errors[4096];
};

/* Runs the case in a child: in this process image (library NULL), or with LD_PRELOAD set
 * to `library` ("" for none) in a fresh one, which gets the pointer pipe as fd 3. */
static int runChild(const char* self, const char* name, const char* library, struct Outcome* outcome) {
  int pointerPipe[2], errorPipe[2];
  if (pipe(pointerPipe) != 0 || pipe(errorPipe) != 0) return -1;
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    close(pointerPipe[0]);
    close(errorPipe[0]);
    dup2(errorPipe[1], STDERR_FILENO);
    signal(SIGABRT, SIG_DFL);
    if (library == NULL) {
      pointerFd = pointerPipe[1];
      _exit(runCase(name));
    }
    dup2(pointerPipe[1], 3);
    if (library[0] != '\0') setenv("LD_PRELOAD", library, 1);
    else unsetenv("LD_PRELOAD");
    execl(self, self, "--child", name, (char*)NULL);
    _exit(127);
  }
  close(pointerPipe[1]);
  close(errorPipe[1]);
  readAll(pointerPipe[0], outcome->pointer, sizeof outcome->pointer);
  readAll(errorPipe[0], outcome->errors, sizeof outcome->errors);
  close(pointerPipe[0]);
  close(errorPipe[0]);
  waitpid(child, &outcome->status, 0);
  char* newline = strchr(outcome->pointer, '\n');
  if (newline != NULL) *newline = '\0';
  return 0;
}

static int diedOf(const struct Outcome* outcome, int signalNumber) {
  return WIFSIGNALED(outcome->status) && WTERMSIG(outcome->status) == signalNumber;
}

/* A line "heapkit: ...<phrase>... <pointer>" on the child's standard error. */
static int reportNames(const struct Outcome* outcome, const char* phrase) {
  if (outcome->pointer[0] == '\0') return 0;
  for (const char* line = outcome->errors; line != NULL && *line != '\0';) {
    const char* end = strchr(line, '\n');
    size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
    size_t pointerLength = strlen(outcome->pointer);
    char text[512];
    if (length < sizeof text) {
      memcpy(text, line, length);
      text[length] = '\0';
      if (strncmp(text, "heapkit: ", 9) == 0 && (phrase == NULL || strstr(text, phrase) != NULL) && length > pointerLength &&
          text[length - pointerLength - 1] == ' ' && strcmp(text + length - pointerLength, outcome->pointer) == 0)
        return 1;
    }
    line = end != NULL ? end + 1 : NULL;
  }
  return 0;
}

static int checkCase(const char* name, const char* expected) {
  struct Outcome outcome;
  if (runChild(NULL, name, NULL, &outcome) != 0) return 2;
  fprintf(stderr, "case %s: pointer %s; the child's standard error:\n%s", name, outcome.pointer, outcome.errors);
  if (strcmp(expected, "survives") == 0) {
    if (WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0 && outcome.errors[0] == '\0') return 0;
    fprintf(stderr, "FAIL: expected a normal exit with nothing on standard error\n");
    return 1;
  }
  if (strcmp(expected, "SIGSEGV") == 0) {
    if (diedOf(&outcome, SIGSEGV) || diedOf(&outcome, SIGBUS)) return 0;
    fprintf(stderr, "FAIL: expected a fault (SIGSEGV or SIGBUS)\n");
    return 1;
  }
  if (!diedOf(&outcome, SIGABRT)) {
    if (WIFSIGNALED(outcome.status)) fprintf(stderr, "FAIL: killed by signal %d, not SIGABRT\n", WTERMSIG(outcome.status));
    else fprintf(stderr, "FAIL: exited with status %d instead of stopping\n", WEXITSTATUS(outcome.status));
    return 1;
  }
  if (strcmp(expected, "glibc") == 0) return 0;
  if (!reportNames(&outcome, expected)) {
    fprintf(stderr, "FAIL: expected a line \"heapkit: ...%s... %s\"\n", expected, outcome.pointer);
    return 1;
  }
  return 0;
}

/* One cell: how the case ended under the library. A heapkit library's abort counts only
 * with its line naming the pointer. */
static const char* cell(const char* self, const char* name, const char* library, int* stopped) {
  struct Outcome outcome;
  if (runChild(self, name, library, &outcome) != 0) return "error";
  if (diedOf(&outcome, SIGSEGV) || diedOf(&outcome, SIGBUS)) {
    ++*stopped;
    return "fault";
  }
  if (diedOf(&outcome, SIGABRT)) {
    if (strstr(outcome.errors, "heapkit: ") != NULL && !reportNames(&outcome, NULL)) return "abort, no line";
    ++*stopped;
    return "abort";
  }
  if (WIFSIGNALED(outcome.status)) return "other signal";
  return "-";
}

static int table(const char* self, int count, char** allocators) {
  enum { kMaxAllocators = 16 };
  if (count < 1 || count > kMaxAllocators) return 2;
  const char* names[kMaxAllocators];
  const char* libraries[kMaxAllocators];
  int stopped[kMaxAllocators] = {0};
  for (int a = 0; a < count; ++a) {
    char* equals = strchr(allocators[a], '=');
    if (equals == NULL) {
      fprintf(stderr, "heapkit_misuse --table: expected <name>=<library>, got \"%s\"\n", allocators[a]);
      return 2;
    }
    *equals = '\0';
    names[a] = allocators[a];
    libraries[a] = equals + 1;
  }
  printf("| case |");
  for (int a = 0; a < count; ++a) printf(" %s |", names[a]);
  printf("\n|---|");
  for (int a = 0; a < count; ++a) printf("---|");
  printf("\n");
  int cases = 0;
  char name[64];
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; ++k) {
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; ++z) {
      if (strcmp(kinds[k], "overflow-1m") == 0 && strcmp(sizes[z], "large") != 0) continue;
      snprintf(name, sizeof name, "%s-%s", kinds[k], sizes[z]);
      printf("| %s |", name);
      for (int a = 0; a < count; ++a) printf(" %s |", cell(self, name, libraries[a], &stopped[a]));
      printf("\n");
      fflush(stdout);
      ++cases;
    }
  }
  for (size_t c = 0; c < sizeof otherCases / sizeof otherCases[0]; ++c) {
    printf("| %s |", otherCases[c]);
    for (int a = 0; a < count; ++a) printf(" %s |", cell(self, otherCases[c], libraries[a], &stopped[a]));
    printf("\n");
    fflush(stdout);
    ++cases;
  }
  printf("| **stopped, of %d** |", cases);
  for (int a = 0; a < count; ++a) printf(" **%d** |", stopped[a]);
  printf("\n");
  return stopped[count - 1] < stopped[0] ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) {
    pointerFd = 3;
    signal(SIGABRT, SIG_DFL);
    return runCase(argv[2]);
  }
  if (argc >= 3 && strcmp(argv[1], "--table") == 0) {
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) return 2;
    self[length] = '\0';
    return table(self, argc - 2, argv + 2);
  }
  if (argc != 3) {
    fprintf(stderr,
            "usage: %s <case> <report phrase|SIGSEGV|glibc|survives>\n"
            "       %s --table <name>=<library>...\n",
            argv[0], argv[0]);
    return 2;
  }
  return checkCase(argv[1], argv[2]);
}
