// A user's own composition: exact-size free lists for objects up to 512 bytes (16-byte
// classes), Doug Lea's allocator for everything else, one lock for threads. Any heap that
// keeps size words (or has memalign) works: ANSIWrapper adds the C semantics on top.
#pragma once

#include <cstddef>

#include "heapkit/building/FreelistHeap.h"
#include "heapkit/combining/StrictSegHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/threads/LockedHeap.h"

namespace example {

constexpr std::size_t kClasses = 32;
constexpr std::size_t sizeToClass(std::size_t size) { return size <= 16 ? 0 : (size - 1) / 16; }
constexpr std::size_t classToSize(std::size_t sizeClass) { return (sizeClass + 1) * 16; }

using MyHeap = heapkit::LockedHeap<
    heapkit::SpinLock,
    heapkit::StrictSegHeap<heapkit::FunctionBins<kClasses, sizeToClass, classToSize>, heapkit::FreelistHeap, heapkit::LeaHeap<>>>;

}  // namespace example
