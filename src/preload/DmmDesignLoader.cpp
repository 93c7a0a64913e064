#include "DmmDesignLoader.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "Spec.h"

namespace heapkit::preload {
namespace {
[[noreturn]] void refuse(const std::string& why) {
  std::string line = "heapkit-dmm: " + why + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  _exit(127);
}
}  // namespace

void loadDesignOrExit(DmmSpec& design) {
  const char* path = std::getenv("HEAPKIT_SPEC");
  if (path == nullptr || *path == '\0') refuse("HEAPKIT_SPEC is not set: name the DMM spec file this library runs");
  try {
    design = sim::loadSpec(path).dmm;
  } catch (const std::exception& error) {
    refuse(error.what());
  }
}

}  // namespace heapkit::preload
