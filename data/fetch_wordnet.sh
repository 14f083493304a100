#!/usr/bin/env bash
# fetch_wordnet.sh - builds nabla's English text corpus (for examples/bert_mlm)
# from the glosses of WordNet 3.0, in Debian's wordnet-base package. The
# package comes from `apt-get download` (only the Debian archive is needed;
# nothing is installed) and is unpacked with `dpkg-deb -x` into a temporary
# directory. Every synset line of data.noun, data.verb, data.adj and data.adv
# (in that order; the license header lines, which begin with two spaces, are
# skipped) ends in "| gloss": the gloss is split at the semicolons outside
# double quotes into definitions and "quoted" example sentences; each
# becomes one line (quotes and an attribution after the closing quote
# dropped, whitespace squeezed). Lines already seen are dropped (first
# occurrence kept), so no sentence is in both splits. Split: every 20th
# synset (synsets 19, 39, ... counting from 0 over the four files) goes with
# all its sentences to eval.txt, the rest to train.txt, so a definition and
# its examples are never divided between the splits. corpus.txt holds every
# line in file order. Output is a pure function of the package's data files
# (LC_ALL=C, no randomness). The files are written atomically with a
# SHA256SUMS; when they are present and match it, running it again does
# nothing. Prints the directory on stdout.
#
# Usage: data/fetch_wordnet.sh [DIR]
#   DIR defaults to $NB_WORDNET_DIR, else $XDG_CACHE_HOME/nabla/wordnet, else
#   ~/.cache/nabla/wordnet (the same order as nb_wordnet_default_dir).
set -euo pipefail
export LC_ALL=C

dir=${1:-${NB_WORDNET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nabla/wordnet}}
OUTS=(corpus.txt train.txt eval.txt)
EVAL_EVERY=20

say() { echo "fetch_wordnet: $*" >&2; }

present() {
  [ -f "$dir/SHA256SUMS" ] || return 1
  local f
  for f in "${OUTS[@]}"; do grep -q " $f\$" "$dir/SHA256SUMS" || return 1; done
  (cd "$dir" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1)
}

if present; then
  say "corpus already present and valid in $dir"
  echo "$dir"
  exit 0
fi

for tool in apt-get dpkg-deb awk sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { say "$tool not found (a Debian/Ubuntu system is needed)"; exit 1; }
done

mkdir -p -- "$dir"
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
chmod 755 "$tmp" # apt's _apt user downloads into it when it can

say "downloading wordnet-base from the Debian archive (about 6.5 MB)"
(cd "$tmp" && apt-get download wordnet-base >"$tmp/apt.log" 2>&1) || {
  cat "$tmp/apt.log" >&2
  say "apt-get download wordnet-base failed (run apt-get update first? is the archive reachable?)"
  exit 1
}
deb=$(find "$tmp" -maxdepth 1 -name 'wordnet-base_*.deb' | head -n 1)
[ -n "$deb" ] || { say "apt-get download produced no .deb"; exit 1; }
dpkg-deb -x "$deb" "$tmp/pkg"
version=$(dpkg-deb -f "$deb" Version)
wn="$tmp/pkg/usr/share/wordnet"
for pos in noun verb adj adv; do
  [ -f "$wn/data.$pos" ] || { say "the package has no usr/share/wordnet/data.$pos"; exit 1; }
done

# One output line per sentence: "E\t..." (eval) or "T\t..." (train).
awk -v every="$EVAL_EVERY" '
function trim(s) { gsub(/[ \t\r]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); return s }
function emit(s) {
  s = trim(s)
  if (s == "" || (s in seen)) return
  seen[s] = 1
  print (syn % every == every - 1 ? "E" : "T") "\t" s
}
# A piece "quoted example" (an attribution may follow) or a definition.
function piece(p,   q) {
  p = trim(p)
  if (substr(p, 1, 1) == "\"") {
    p = substr(p, 2)
    q = index(p, "\"")
    if (q > 0) p = substr(p, 1, q - 1)
  }
  emit(p)
}
/^  / { next }  # the license header
{
  bar = index($0, " | ")
  if (bar == 0) { syn++; next }
  g = substr($0, bar + 3)
  # Split at ";" outside quotes; a gloss with unbalanced quotes (a typo in
  # WordNet) is split at every ";" instead.
  n = gsub(/"/, "\"", g)
  start = 1; inq = 0
  for (i = 1; i <= length(g); i++) {
    c = substr(g, i, 1)
    if (c == "\"") inq = !inq
    else if (c == ";" && (!inq || n % 2 == 1)) { piece(substr(g, start, i - start)); start = i + 1 }
  }
  piece(substr(g, start))
  syn++
}' "$wn/data.noun" "$wn/data.verb" "$wn/data.adj" "$wn/data.adv" >"$tmp/tagged"

cut -f2- "$tmp/tagged" >"$tmp/corpus.txt"
{ grep '^T' "$tmp/tagged" || true; } | cut -f2- >"$tmp/train.txt"
{ grep '^E' "$tmp/tagged" || true; } | cut -f2- >"$tmp/eval.txt"
for f in "${OUTS[@]}"; do
  [ -s "$tmp/$f" ] || { say "extracted an empty $f"; exit 1; }
done

stats() { wc -l -w <"$1" | awk '{ printf "%d lines, %d words", $1, $2 }'; }
{
  echo "WordNet 3.0 glosses and examples from Debian's wordnet-base $version"
  echo "(WordNet license: usr/share/doc/wordnet-base/copyright of that package)"
  for f in "${OUTS[@]}"; do echo "$f: $(stats "$tmp/$f")"; done
} >"$tmp/README"

# Replace atomically, SHA256SUMS last, so an interrupted run is never "valid".
rm -f -- "$dir/SHA256SUMS"
for f in "${OUTS[@]}" README; do
  cp -- "$tmp/$f" "$dir/$f.part"
  mv -f -- "$dir/$f.part" "$dir/$f"
done
(cd "$dir" && sha256sum "${OUTS[@]}" >SHA256SUMS.part && mv -f SHA256SUMS.part SHA256SUMS)
for f in "${OUTS[@]}"; do say "$dir/$f: $(stats "$dir/$f")"; done
echo "$dir"
