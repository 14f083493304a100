#!/usr/bin/env bash
# quickstart.sh - the README's first command: installs what is missing
# (Debian 12, as root), fetches MNIST, builds nabla and trains the MLP.
#   examples/quickstart.sh [mnist_mlp flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh
bash data/fetch_mnist.sh
[[ -f build/build.ninja ]] || meson setup build -Dbuildtype=release >/dev/null
ninja -C build >/dev/null
exec build/examples/mnist_mlp "$@"
