// `heapkit emit`: a DMM spec as a readable C++ header, the heap-layers type expression of
// the design with the spec's values as compile-time constants (StaticDmmHeap over the
// same layers the simulator ran). Written here, from the parsed spec, so the constants are
// the very values the simulator used.
#pragma once

#include <string>

#include "Spec.h"

namespace heapkit::sim {

// The header's text; its types live in `namespaceName` (a C++ identifier).
std::string emitHeader(const ParsedSpec& spec, const std::string& namespaceName, const std::string& source);

// One page_segregated allocator over every size: the header also defines ThreadAware<Top>,
// the design as libheapkit.so's thread-aware ScalableHeap (what `heapkit build` ships).
bool isThreadAware(const DmmSpec& dmm);

// One allocator of another mechanism over every size: the header also defines Direct<Top>,
// the allocator directly over Top without arena or routing (what `heapkit build` ships,
// as heapkit's single-heap libraries are built).
bool isDirect(const DmmSpec& dmm);

}  // namespace heapkit::sim
