// A C++ library that a C program loads with dlopen(RTLD_LOCAL), as Python loads a C++
// extension module: the C++ runtime then comes in outside the global scope, and the
// preloaded operator new must still find it to call the new_handler and throw
// std::bad_alloc. Returns the number of failed checks.
#include <cstdint>
#include <new>

namespace {
int handlerCalls = 0;
constexpr std::size_t kImpossible = SIZE_MAX / 2;
}  // namespace

extern "C" int heapkit_plugin_new_semantics() {
  int failures = 0;
  try {
    (void)::operator new(kImpossible);
    ++failures;
  } catch (const std::bad_alloc&) {
  }
  handlerCalls = 0;
  std::set_new_handler([] {
    if (++handlerCalls == 3) std::set_new_handler(nullptr);
  });
  try {
    (void)::operator new[](kImpossible, std::align_val_t{64});
    ++failures;
  } catch (const std::bad_alloc&) {
  }
  if (handlerCalls != 3) ++failures;
  if (::operator new(kImpossible, std::nothrow) != nullptr) ++failures;
  int* numbers = new int[100]();
  numbers[99] = 7;
  if (numbers[0] != 0 || numbers[99] != 7) ++failures;
  delete[] numbers;
  return failures;
}
