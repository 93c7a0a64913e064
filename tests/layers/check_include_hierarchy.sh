#!/usr/bin/env bash
# The folder structure is the architecture: a header may include only its own folder and
# folders below it. Levels, lowest first; a folder not listed here fails the check.
set -euo pipefail
root="${1:?usage: check_include_hierarchy.sh INCLUDE_DIR}/heapkit"

level_of() {
  case "$1" in
    core | trace) echo 0 ;;
    top) echo 1 ;;
    objectrep) echo 2 ;;
    building) echo 3 ;;
    utility) echo 4 ;;
    combining) echo 5 ;;
    general) echo 6 ;;
    special | threads | dmm) echo 7 ;;
    wrapper) echo 8 ;;
    *) echo "unknown" ;;
  esac
}

status=0
for header in "$root"/*/*.h; do
  folder=$(basename "$(dirname "$header")")
  level=$(level_of "$folder")
  if [ "$level" = unknown ]; then
    echo "$header: folder '$folder' has no level in $0"
    status=1
    continue
  fi
  while read -r included; do
    included_folder=${included%%/*}
    included_level=$(level_of "$included_folder")
    if [ "$included_level" = unknown ] || [ "$included_level" -gt "$level" ]; then
      echo "$header includes heapkit/$included: $folder (level $level) may not include $included_folder"
      status=1
    fi
  done < <(sed -n 's|^#include "heapkit/\([^"]*\)".*|\1|p' "$header")
done
[ $status -eq 0 ] && echo "include hierarchy: ok"
exit $status
