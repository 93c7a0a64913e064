#!/usr/bin/env bash
# Installs what heapkit needs from Debian's packages, skipping what is already there.
# Usage: scripts/install-deps.sh [extra-package...]
set -euo pipefail

packages=(cmake ninja-build g++ make libgtest-dev libbenchmark-dev valgrind "$@")

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y --no-install-recommends "${missing[@]}" || {
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
}
