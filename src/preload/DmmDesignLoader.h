// The design libheapkit-dmm.so runs: read from the spec file HEAPKIT_SPEC names.
#pragma once

#include "heapkit/dmm/DmmSpec.h"

namespace heapkit::preload {

// Fills `design` from HEAPKIT_SPEC, or stops the process with the spec's error on standard
// error and status 127. Its own translation unit: the spec reader reports errors as C++
// exceptions, while the malloc family (DmmProvider.cpp) is compiled without them.
void loadDesignOrExit(DmmSpec& design);

}  // namespace heapkit::preload
