/* c_host_of_cxx_plugin PLUGIN: a C program, preloaded with a heapkit library, that loads a
 * C++ library RTLD_LOCAL and runs its checks of operator new (cxx_plugin.cpp). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PLUGIN\n", argv[0]);
    return 2;
  }
  /* No C++ runtime is in the global scope: operator new can only be the preloaded one. */
  Dl_info info;
  void* newSymbol = dlsym(RTLD_DEFAULT, "_Znwm");
  if (newSymbol == NULL || !dladdr(newSymbol, &info) || strstr(info.dli_fname, "heapkit") == NULL) {
    fprintf(stderr, "FAIL: operator new is not a heapkit library's\n");
    return 1;
  }
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == NULL) {
    fprintf(stderr, "FAIL: %s\n", dlerror());
    return 1;
  }
  int (*check)(void) = (int (*)(void))dlsym(plugin, "heapkit_plugin_new_semantics");
  int failures = check ? check() : -1;
  if (failures != 0) {
    fprintf(stderr, "FAIL: %d checks of operator new failed in the plugin\n", failures);
    return 1;
  }
  puts("ok: operator new found the C++ runtime of a library loaded RTLD_LOCAL");
  return 0;
}
