"""Fixtures: small C programs to record, compiled once per session."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PROGRAMS = {
    # Known operations with sizes that nothing else in a process allocates.
    "known": r"""
#include <stdlib.h>
#include <string.h>
int main(void) {
  /* volatile: the compiler may drop a malloc whose result is only freed */
  void* volatile a = malloc(12345);
  void* volatile b = calloc(7, 1111);          /* 7777 bytes */
  a = realloc(a, 23456);
  void* c = NULL;
  if (posix_memalign(&c, 4096, 3333) != 0) return 2;
  void* volatile d = aligned_alloc(256, 2560);
  memset(a, 1, 23456);
  free(b); free(a); free(c); free(d);
  for (int i = 0; i < 1000; i++) { void* volatile p = malloc(4321); free(p); }
  return 0;
}
""",
    "threads_fork_exec": r"""
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void* work(void* arg) {
  (void)arg;
  for (int i = 0; i < 500; i++) { void* volatile p = malloc(5555); free(p); }
  return NULL;
}
int main(int argc, char** argv) {
  if (argc > 1) {  /* the image the child execs */
    void* volatile q = malloc(7070);
    (void)q;
    return 0;
  }
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, work, NULL);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  pid_t child = fork();
  if (child == 0) {
    void* volatile p = malloc(6666);
    free(p);
    execl(argv[0], argv[0], "exec", (char*)NULL);
    _exit(9);
  }
  waitpid(child, NULL, 0);
  return 5;
}
""",
    "crash": r"""
#include <stdlib.h>
#include <string.h>
int main(void) {
  /* Enough records for several full blocks: some still queued for the writer thread at the crash. */
  for (int i = 0; i < 200000; i++) { void* volatile p = malloc(8888); free(p); }
  volatile int* nothing = NULL;
  return *nothing;  /* SIGSEGV */
}
""",
    # Objects allocated on one thread and freed on another while the allocator hands the
    # same addresses out again: the trace is right only if the recorder orders the threads'
    # operations exactly (the single-thread numbering must hand over to the shared one).
    "handoff": r"""
#include <pthread.h>
#include <stdlib.h>
#define N 20000
static void* volatile slot[64];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void* consume(void* arg) {
  (void)arg;
  for (int done = 0; done < N;) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 64; i++)
      if (slot[i]) { free(slot[i]); slot[i] = NULL; done++; }
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}
int main(void) {
  for (int i = 0; i < 1000; i++) { void* volatile p = malloc(3131); free(p); }  /* before the thread */
  pthread_t t;
  pthread_create(&t, NULL, consume, NULL);
  for (int made = 0; made < N;) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 64 && made < N; i++)
      if (!slot[i]) { slot[i] = malloc(4040); made++; }
    pthread_mutex_unlock(&lock);
  }
  pthread_join(t, NULL);
  return 0;
}
""",
    # A mix of sizes, lifetimes, reallocs and aligned requests, deterministic, printing a
    # checksum of its data: for the simulator's tests and for running under DMM designs.
    "churn": r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 40000;
  enum { SLOTS = 4096 };
  static unsigned char* slot[SLOTS];
  static size_t length[SLOTS];
  unsigned long long x = 88172645463325252ULL, sum = 0;
  for (int i = 0; i < rounds; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    int s = (int)(x % SLOTS);
    if (slot[s]) {
      for (size_t k = 0; k < length[s]; k += 61) sum += slot[s][k];
      if (x % 5 == 0) {
        size_t n = 1 + (x >> 20) % 3000;
        unsigned char* p = realloc(slot[s], n);
        if (!p) return 3;
        if (n > length[s]) memset(p + length[s], (int)(i & 255), n - length[s]);
        slot[s] = p; length[s] = n;
        continue;
      }
      free(slot[s]); slot[s] = NULL;
      continue;
    }
    size_t n = (x >> 12) % 16 == 0 ? 4096 + (x >> 24) % 200000 : 1 + (x >> 24) % ((x >> 40) % 4 == 0 ? 1024 : 96);
    unsigned char* p;
    if ((x >> 50) % 64 == 0) { if (posix_memalign((void**)&p, 64, n) != 0) return 4; }
    else p = malloc(n);
    if (!p) return 2;
    memset(p, (int)(i & 255), n);
    slot[s] = p; length[s] = n;
  }
  for (int s = 0; s < SLOTS; s++) free(slot[s]);
  printf("churn %d %llu\n", rounds, sum);
  return 0;
}
""",
    # A driver that allocates little and runs the programs named on its command line one
    # after the other, as a compiler driver or a shell script does: heapkit tune must tune
    # on the busiest of them, not on the driver.
    "driver": r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char** argv) {
  void* volatile p = malloc(99);
  free(p);
  for (int i = 1; i < argc; i++) {  /* each argument: a command line for sh */
    pid_t child = fork();
    if (child == 0) {
      execl("/bin/sh", "sh", "-c", argv[i], (char*)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  return 0;
}
""",
    "mtrace": r"""
#include <mcheck.h>
#include <stdlib.h>
int main(void) {
  mtrace();
  void* volatile a = malloc(100);
  void* volatile b = malloc(200);
  a = realloc(a, 300);
  free(b);
  free(a);
  muntrace();
  return 0;
}
""",
}


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> dict[str, Path]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler to build the test programs")
    out = tmp_path_factory.mktemp("programs")
    built = {}
    for name, source in PROGRAMS.items():
        src = out / f"{name}.c"
        src.write_text(source)
        exe = out / name
        subprocess.run([cc, "-O1", "-pthread", "-o", str(exe), str(src)], check=True)
        built[name] = exe
    return built


# A malloc made slow on purpose, preloaded over glibc's: a race must tell it from glibc.
SLOW_MALLOC = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
extern void* __libc_malloc(size_t);
void* malloc(size_t size) {
  for (volatile int spin = 0; spin < 2000; spin++) {
  }
  return __libc_malloc(size);
}
"""


@pytest.fixture(scope="session")
def slow_malloc(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    out = tmp_path_factory.mktemp("slow")
    (out / "slow.c").write_text(SLOW_MALLOC)
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(out / "libslow.so"), str(out / "slow.c")], check=True)
    return out / "libslow.so"


@pytest.fixture
def heapkit_cli() -> list[str]:
    """The installed command, run as a separate process as a user would."""
    import sys

    exe = Path(sys.executable).parent / "heapkit"
    assert exe.is_file(), exe
    return [str(exe)]


@pytest.fixture(scope="session")
def churn_trace(programs, tmp_path_factory) -> Path:
    """The churn program recorded once: a mix of sizes, lifetimes, reallocs and aligned requests."""
    import heapkit

    out = tmp_path_factory.mktemp("churn") / "churn.hkt"
    # Not to a terminal (`pytest -s`), where stdio's buffer is 1 KiB instead of 4: the same
    # trace in every run.
    heapkit.record([str(programs["churn"]), "20000"], out, stdout=subprocess.DEVNULL)
    return out
