#!/usr/bin/env bash
# check_no_cxx_runtime.sh [--allow-static-runtime] LIBRARY...: a preload library heapkit
# ships must load nothing but libc (and the dynamic linker libc itself needs) into the
# programs it runs under: no libstdc++, libm or libgcc_s. Checked three ways: the library's
# NEEDED entries; a C program (cat) preloaded with it has none of them mapped; and it
# exports nothing of the C++ runtime. Without --allow-static-runtime (libheapkit-dmm.so's
# spec reader throws, so it carries a private copy) the runtime's code must not be inside
# either: the malloc family needs none of it.
set -euo pipefail
allow_static=0
if [ "${1:-}" = "--allow-static-runtime" ]; then
  allow_static=1
  shift
fi
status=0
fail() {
  echo "FAIL: $*"
  status=1
}
for library in "$@"; do
  name=$(basename "$library")
  needed=$(readelf -d "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  for dependency in $needed; do
    case "$dependency" in
      libc.so.6 | ld-linux-x86-64.so.2) ;;
      *) fail "$name needs $dependency" ;;
    esac
  done
  mapped=$(LD_PRELOAD="$library" cat /proc/self/maps)
  grep -qF "$name" <<< "$mapped" || fail "$name is not mapped into a preloaded process"
  loaded=$(grep -oE 'lib(stdc\+\+|c\+\+|m|gcc_s)\.so[.0-9]*' <<< "$mapped" | sort -u | tr '\n' ' ' || true)
  [ -z "$loaded" ] || fail "a C program preloaded with $name maps $loaded"
  exported=$(nm -D --defined-only "$library" | awk '{print $3}' |
             grep -E '^(__cxa_|__gxx_|_Unwind_|_ZSt|_ZNSt|_ZTI|_ZTS|_ZTV|_ZN9__gnu_cxx)' | tr '\n' ' ' || true)
  [ -z "$exported" ] || fail "$name exports C++ runtime symbols: $exported"
  if [ $allow_static -eq 0 ]; then
    inside=$(nm "$library" | awk '$2 ~ /^[TtWw]$/ {print $3}' |
             grep -E '^(__cxa_throw|__cxa_guard_acquire|__gxx_personality_v0|_Unwind_RaiseException)$' | tr '\n' ' ' || true)
    [ -z "$inside" ] || fail "$name contains C++ runtime code: $inside"
  fi
  echo "$name needs: $needed"
done
[ $status -eq 0 ] && echo "ok: no runtime loaded by $# libraries"
exit $status
