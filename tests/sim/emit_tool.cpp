// heapkit_sim_emit_tool OUT SPEC...: every spec through heapkit emit's generator, into one
// header of designs for emit_test.cpp (built and checked at test time, so the test fails
// if emitted code stops compiling under -Wall -Werror or stops matching the simulator).
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "Emit.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: heapkit_sim_emit_tool OUT SPEC...\n");
    return 1;
  }
  std::string designs, specs, threadAware, direct;
  try {
    std::string out;
    for (int i = 2; i < argc; ++i) {
      std::string ns = "design" + std::to_string(i - 2);
      heapkit::sim::ParsedSpec spec = heapkit::sim::loadSpec(argv[i]);
      out += heapkit::sim::emitHeader(spec, ns, argv[i]) + "\n";
      if (heapkit::sim::isThreadAware(spec.dmm))
        threadAware += std::string(threadAware.empty() ? "" : ",\n    ") + ns + "::ThreadAware<heapkit::MmapHeap>";
      if (heapkit::sim::isDirect(spec.dmm))
        direct += std::string(direct.empty() ? "" : ",\n    ") + ns + "::Direct<>";
      designs += std::string(i == 2 ? "" : ",\n    ") + ns + "::Dmm<heapkit::CountedMemory>";
      specs += std::string(i == 2 ? "" : ",\n    ") + "\"" + argv[i] + "\"";
    }
    out += "#include <tuple>\n\nnamespace emitted {\nusing ThreadAwareDesigns = std::tuple<\n    " + threadAware +
           ">;\nusing DirectDesigns = std::tuple<\n    " + direct + ">;\nusing Designs = std::tuple<\n    " + designs +
           ">;\ninline constexpr const char* kSpecPaths[] = {\n    " + specs + "};\n}  // namespace emitted\n";
    std::ofstream(argv[1]) << out;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "heapkit_sim_emit_tool: %s\n", error.what());
    return 2;
  }
}
