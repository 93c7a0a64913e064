#!/usr/bin/env bash
# run_real_program.sh CASE LIBRARY WORKDIR: runs an unmodified program from this machine
# once on glibc's malloc and once with LIBRARY preloaded, and fails unless both runs
# exit 0 with the same output. CASE: python | gxx | git | sort | bash.
set -euo pipefail
case_name=${1:?case}
library=${2:?library}
work=${3:?workdir}
here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
cd "$work"

# The library must really be in the process: a preload that fails to load only warns.
# The maps are read whole first: `cat | grep -q` under pipefail fails whenever grep stops
# at its match before cat has written everything (cat dies of SIGPIPE).
maps=$(LD_PRELOAD="$library" cat /proc/self/maps)
if ! grep -qF "$(basename "$library")" <<< "$maps"; then
  echo "FAIL: $library is not mapped into a preloaded process" >&2
  exit 1
fi

prepare() {
  case "$case_name" in
    sort)  # ~8 MB of pseudo-random lines
      awk 'BEGIN { x = 12345; for (i = 0; i < 400000; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d line %x %s\n", x % 100000, x, substr("abcdefghijklmnopqrstuvwxyz", 1 + x % 26) } }' > input.txt ;;
  esac
}

run() {  # run OUTDIR: the case's command, stdout+stderr to OUTDIR/out
  local out=$1
  mkdir -p "$out"
  case "$case_name" in
    python) python3 "$here/alloc_heavy.py" ;;
    gxx) g++ -std=c++20 -O2 -S -o - -I"$repo_root/include" -I"$repo_root/src/wrapper" \
           "$repo_root/src/wrapper/wrapper.cpp" | md5sum ;;
    git)
      export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
      export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z" GIT_CONFIG_NOSYSTEM=1 HOME="$out"
      git init -q -b main "$out/repo" && cd "$out/repo"
      for i in $(seq 1 30); do
        seq "$i" 3 3000 > "file$((i % 7)).txt"
        git add -A && git commit -q -m "commit $i"
      done
      git log --stat --format='%H %s' | tail -n 40
      git diff HEAD~10 HEAD | md5sum
      git gc -q && git fsck --no-progress 2>&1 && git rev-list --count HEAD
      cd - > /dev/null ;;
    sort) sort -t' ' -k1,1n -k2 input.txt | md5sum; sort -u input.txt | wc -l ;;
    bash) bash -c '
        declare -A table; list=()
        for ((i = 0; i < 20000; i++)); do table[k$((i * 7 % 5003))]=$i; list+=("item$i"); done
        s=""; for ((i = 0; i < 3000; i++)); do s+="${list[i]:2}"; done
        echo "${#table[@]} ${#list[@]} ${#s}"
        echo "$(for k in "${!table[@]}"; do echo "$k=${table[$k]}"; done | sort | md5sum)"
        words=$(printf "%s\n" "${list[@]}" | tr a-z A-Z | sort -r | head -3 | tr "\n" " "); echo "$words"
        f() { local x=$1; ((x > 0)) && f $((x - 1)); echo -n "$x"; }; f 200 | md5sum' ;;
    *) echo "unknown case $case_name" >&2; exit 2 ;;
  esac > "$out/out" 2>&1
}

prepare
( run "$work/glibc" ) || { echo "FAIL: the reference run on glibc failed:"; cat "$work/glibc/out"; exit 1; }
( export LD_PRELOAD="$library"; run "$work/heapkit" ) || {
  echo "FAIL: $case_name under $(basename "$library") exited non-zero:"; cat "$work/heapkit/out"; exit 1; }
if ! diff -u "$work/glibc/out" "$work/heapkit/out"; then
  echo "FAIL: $case_name output differs under $(basename "$library")"
  exit 1
fi
echo "ok: $case_name under $(basename "$library") matches glibc ($(wc -l < "$work/glibc/out") lines)"
