#!/usr/bin/env bash
# Installs the Debian packages flow builds against, when they are missing (idempotent, quiet when done).
set -euo pipefail
pkgs=(cmake g++ make libgtest-dev libxxhash-dev llvm-14-dev libdnnl-dev ccache)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[flow] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
