/* One misuse of the malloc family per case, each run in a child process: the parent
 * checks that the child died of SIGABRT and, for heapkit's libraries, that its standard
 * error holds the one-line report naming the exact pointer.
 *
 *   heapkit_misuse <case> <expected>
 *     <expected>: "double free of" or "invalid pointer" (heapkit's message, which must
 *     name the pointer the case prints), or "glibc" (SIGABRT with glibc's own message:
 *     the recorder forwards to glibc), or "survives" (the case must exit normally). */
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
  else return 2;
  return 0;
}

static size_t readAll(int fd, char* buffer, size_t capacity) {
  size_t used = 0;
  ssize_t got;
  while (used + 1 < capacity && (got = read(fd, buffer + used, capacity - 1 - used)) > 0) used += (size_t)got;
  buffer[used] = '\0';
  return used;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <case> <\"double free of\"|\"invalid pointer\"|glibc|survives>\n", argv[0]);
    return 2;
  }
  const char* expected = argv[2];
  int pointerPipe[2], errorPipe[2];
  if (pipe(pointerPipe) != 0 || pipe(errorPipe) != 0) return 2;
  pid_t child = fork();
  if (child == 0) {
    close(pointerPipe[0]);
    close(errorPipe[0]);
    dup2(errorPipe[1], STDERR_FILENO);
    pointerFd = pointerPipe[1];
    signal(SIGABRT, SIG_DFL);
    _exit(runCase(argv[1]));
  }
  close(pointerPipe[1]);
  close(errorPipe[1]);
  char pointer[64], errors[4096];
  readAll(pointerPipe[0], pointer, sizeof pointer);
  readAll(errorPipe[0], errors, sizeof errors);
  int status;
  waitpid(child, &status, 0);
  char* newline = strchr(pointer, '\n');
  if (newline != NULL) *newline = '\0';
  fprintf(stderr, "case %s: pointer %s; the child's standard error:\n%s", argv[1], pointer, errors);

  if (strcmp(expected, "survives") == 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && errors[0] == '\0') return 0;
    fprintf(stderr, "FAIL: expected a normal exit with nothing on standard error\n");
    return 1;
  }
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
    if (WIFSIGNALED(status)) fprintf(stderr, "FAIL: killed by signal %d, not SIGABRT\n", WTERMSIG(status));
    else fprintf(stderr, "FAIL: exited with status %d instead of stopping\n", WEXITSTATUS(status));
    return 1;
  }
  if (strcmp(expected, "glibc") == 0) return 0;
  char line[256];
  snprintf(line, sizeof line, "heapkit: free(): %s %s\n", expected, pointer);
  if (pointer[0] == '\0' || strstr(errors, line) == NULL) {
    fprintf(stderr, "FAIL: expected the line \"%.*s\"\n", (int)strlen(line) - 1, line);
    return 1;
  }
  return 0;
}
