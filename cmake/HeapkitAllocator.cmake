# Turns a heap-layers composition into a drop-in malloc.
#
#   heapkit_add_allocator(<name> HEAP "<C++ type>" [INCLUDES <header>...] [OUTPUT_NAME <n>] [UNHARDENED])
#     Builds lib<name>.so (or lib<OUTPUT_NAME>.so), a preload library:
#       LD_PRELOAD=/path/to/lib<name>.so ./program
#     and <name>_objects, an object library that heapkit_link_allocator() links into a
#     program instead. HEAP is the composition below ANSIWrapper, e.g.
#       "heapkit::LockedHeap<heapkit::SpinLock, heapkit::KingsleyHeap<>>"
#     INCLUDES are the headers that define it (heapkit/... or your own, found through the
#     include directories you add to <name>_objects).
#
#   heapkit_add_entry_point_library(<name> SOURCES <file>...)
#     The same, for a hand-written provider of heapkit_entry_points.h (a recorder that
#     forwards to glibc, say).
#
#   heapkit_link_allocator(<target> <name>)
#     Puts the allocator inside an executable: its malloc family replaces the C library's
#     for the whole process, shared libraries included.
#
# Both need the heapkit::heapkit target (find_package(heapkit) or add_subdirectory).

if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/wrapper/wrapper.cpp")
  set(HEAPKIT_WRAPPER_DIR "${CMAKE_CURRENT_LIST_DIR}/wrapper")  # installed package
else()
  set(HEAPKIT_WRAPPER_DIR "${CMAKE_CURRENT_LIST_DIR}/../src/wrapper")  # source tree
endif()
get_filename_component(HEAPKIT_WRAPPER_DIR "${HEAPKIT_WRAPPER_DIR}" ABSOLUTE)
# The functions below run in the caller's directory scope, which may be a parent project
# that pulled heapkit in with add_subdirectory: keep the path where every scope sees it.
set(HEAPKIT_WRAPPER_DIR "${HEAPKIT_WRAPPER_DIR}" CACHE INTERNAL "heapkit's wrapper sources")

# A preloaded library must not load the C++ runtime into every program (libstdc++, libm
# and libgcc_s: about 1.8 MiB of a C program's RSS, and allocations the program never
# made). Whatever of the runtime a provider still uses (heapkit's own use none; the DMM
# library's spec reader throws) is linked in statically and kept private; libraries nothing
# references are dropped.
function(heapkit_link_without_cxx_runtime target)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc "LINKER:--exclude-libs,ALL"
                                        "LINKER:--as-needed")
endfunction()

function(heapkit_add_entry_point_library name)
  find_package(Threads REQUIRED)  # imported targets are per directory: find it where it is used
  # WRAPPER_INCLUDED (internal): a source already #includes wrapper.cpp.
  cmake_parse_arguments(arg "WRAPPER_INCLUDED" "OUTPUT_NAME" "SOURCES" ${ARGN})
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "heapkit_add_entry_point_library(${name}): SOURCES is required")
  endif()
  set(wrapper_source ${HEAPKIT_WRAPPER_DIR}/wrapper.cpp)
  if(arg_WRAPPER_INCLUDED)
    set(wrapper_source)
  endif()
  add_library(${name}_objects OBJECT ${wrapper_source} ${arg_SOURCES})
  target_include_directories(${name}_objects PUBLIC ${HEAPKIT_WRAPPER_DIR})
  target_link_libraries(${name}_objects PUBLIC heapkit::heapkit Threads::Threads)
  set_target_properties(${name}_objects PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden
                                                   VISIBILITY_INLINES_HIDDEN ON)
  # The compiler must not turn malloc+memset into calloc inside calloc, and thread-locals
  # must not call __tls_get_addr (which may allocate) in a preloaded library. No
  # exceptions: the malloc family needs no C++ runtime (src/wrapper/wrapper.cpp says how
  # operator new still throws std::bad_alloc).
  target_compile_options(${name}_objects PRIVATE -fno-builtin -ftls-model=initial-exec -fno-exceptions)
  target_compile_features(${name}_objects PUBLIC cxx_std_20)

  add_library(${name} SHARED)
  target_link_libraries(${name} PRIVATE ${name}_objects)
  heapkit_link_without_cxx_runtime(${name})
  if(arg_OUTPUT_NAME)
    set_target_properties(${name} PROPERTIES OUTPUT_NAME ${arg_OUTPUT_NAME})
  endif()
endfunction()

function(heapkit_add_allocator name)
  # UNHARDENED: without HardenedHeap's checks on free (bench-malloc measures their cost).
  cmake_parse_arguments(arg "UNHARDENED" "HEAP;OUTPUT_NAME" "INCLUDES" ${ARGN})
  if(NOT arg_HEAP)
    message(FATAL_ERROR "heapkit_add_allocator(${name}): HEAP \"<C++ type>\" is required")
  endif()
  set(HEAPKIT_PROVIDER_HEAP "${arg_HEAP}")
  set(HEAPKIT_PROVIDER_CHECKED_HEAP "heapkit::HardenedHeap<${arg_HEAP}>")
  if(arg_UNHARDENED)
    set(HEAPKIT_PROVIDER_CHECKED_HEAP "${arg_HEAP}")
  endif()
  set(HEAPKIT_PROVIDER_INCLUDES "")
  foreach(header IN LISTS arg_INCLUDES)
    string(APPEND HEAPKIT_PROVIDER_INCLUDES "#include \"${header}\"\n")
  endforeach()
  set(source ${CMAKE_CURRENT_BINARY_DIR}/${name}_provider.cpp)
  configure_file(${HEAPKIT_WRAPPER_DIR}/heap_provider.cpp.in ${source} @ONLY)
  set(output_arg)
  if(arg_OUTPUT_NAME)
    set(output_arg OUTPUT_NAME ${arg_OUTPUT_NAME})
  endif()
  heapkit_add_entry_point_library(${name} WRAPPER_INCLUDED SOURCES ${source} ${output_arg})
endfunction()

function(heapkit_link_allocator target name)
  target_link_libraries(${target} PRIVATE ${name}_objects)
  # Export the family from the executable, so that dlopen()ed libraries bind to it too.
  target_link_options(${target} PRIVATE "LINKER:--dynamic-list=${HEAPKIT_WRAPPER_DIR}/malloc_family.dynlist")
endfunction()
