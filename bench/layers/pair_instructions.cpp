// Abstraction penalty, in instructions: runs itself under `valgrind --tool=callgrind`
// once per (case, layered or monolithic), with collection switched on only around the
// loop of malloc+free pairs, and prints instructions per pair. Callgrind counts are
// exact and repeat, so one run per case is enough.
//
//   heapkit-pair-instructions [pairs]            all cases, under valgrind
//   heapkit-pair-instructions --inside name size <layered><inlined> pairs   (what valgrind runs)
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "layers/PairHeaps.h"

using namespace heapkit::bench;

namespace {

int runInside(char** argv) {
  std::string_view name = argv[2];
  std::size_t size = std::strtoull(argv[3], nullptr, 10);
  bool layered = argv[4][0] == '1', inlined = argv[4][1] == '1';
  std::size_t pairs = std::strtoull(argv[5], nullptr, 10);
  withPairHeap(name, layered, [&](auto& heap) {
    mallocFreePairs(heap, size, 1, inlined);  // the first pair takes the slow path: not measured
    CALLGRIND_TOGGLE_COLLECT;
    mallocFreePairs(heap, size, pairs, inlined);
    CALLGRIND_TOGGLE_COLLECT;
  });
  return 0;
}

// The instruction count callgrind collected, or -1.
double countInstructions(const PairCase& pairCase, bool layered, std::size_t pairs) {
  char outFile[] = "/tmp/heapkit-callgrind-XXXXXX";
  int fd = mkstemp(outFile);
  if (fd < 0) return -1;
  close(fd);
  pid_t pid = fork();
  if (pid == 0) {
    std::string outArg = std::string("--callgrind-out-file=") + outFile, name(pairCase.name),
                size = std::to_string(pairCase.size), count = std::to_string(pairs),
                mode = std::string(layered ? "1" : "0") + (pairCase.inlined ? "1" : "0");
    char selfPath[4096];
    ssize_t length = readlink("/proc/self/exe", selfPath, sizeof selfPath - 1);
    if (length <= 0) _exit(127);
    selfPath[length] = '\0';
    const char* args[] = {"valgrind", "--tool=callgrind", "--collect-atstart=no", "--quiet", outArg.c_str(), selfPath,
                          "--inside", name.c_str(), size.c_str(), mode.c_str(), count.c_str(), nullptr};
    execvp("valgrind", const_cast<char**>(args));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double instructions = -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::ifstream in(outFile);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("totals:", 0) == 0 || line.rfind("summary:", 0) == 0) instructions = std::strtod(line.c_str() + line.find(':') + 1, nullptr);
  }
  std::remove(outFile);
  return instructions;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--inside") == 0) return runInside(argv);
  std::size_t pairs = argc == 2 ? std::strtoull(argv[1], nullptr, 10) : 100'000;
  if (pairs == 0) {
    std::fprintf(stderr, "usage: %s [pairs]\n", argv[0]);
    return 2;
  }
  std::printf("| case | layered (instr/pair) | monolithic (instr/pair) | layered / monolithic |\n|---|---:|---:|---:|\n");
  for (const PairCase& pairCase : kPairCases) {
    double layered = countInstructions(pairCase, true, pairs), monolithic = countInstructions(pairCase, false, pairs);
    if (layered < 0 || monolithic < 0) {
      std::fprintf(stderr, "callgrind failed (is valgrind installed?)\n");
      return 1;
    }
    std::printf("| %s, %zu B, %s | %.2f | %.2f | %.3f |\n", std::string(pairCase.name).c_str(), pairCase.size,
                pairCase.inlined ? "inlined" : "called",
                layered / pairs, monolithic / pairs, layered / monolithic);
  }
  return 0;
}
