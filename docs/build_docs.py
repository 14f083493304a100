#!/usr/bin/env python3
"""build_docs.py OUTDIR HEADER... - the API reference: fills Doxyfile.in
(beside this script) for the given public headers, runs Doxygen with
tools/doxygen_filter.py as its input filter, and fails (exit 1) when
Doxygen warned about anything, an undocumented public symbol among them;
the warnings are printed. The HTML index is OUTDIR/html/index.html.
Run by the meson target `docs` (ninja -C build docs) over every installed
header; give it one header to check just that one.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, headers = os.path.abspath(sys.argv[1]), [os.path.abspath(h) for h in sys.argv[2:]]
    doxygen = shutil.which("doxygen")
    if not doxygen:
        sys.exit("build_docs: doxygen is not installed (apt-get install doxygen)")
    version = "unknown"
    for line in open(os.path.join(ROOT, "meson.build")):
        if line.strip().startswith("version :"):
            version = line.split("'")[1]
            break
    os.makedirs(out, exist_ok=True)
    text = open(os.path.join(HERE, "Doxyfile.in")).read()
    for key, value in {"@VERSION@": version, "@OUTDIR@": out, "@INPUT@": " ".join(headers),
                       "@PYTHON@": sys.executable, "@FILTER@": os.path.join(ROOT, "tools", "doxygen_filter.py")}.items():
        text = text.replace(key, value)
    doxyfile = os.path.join(out, "Doxyfile")
    with open(doxyfile, "w") as f:
        f.write(text)
    log = os.path.join(out, "warnings.log")
    if os.path.exists(log):
        os.remove(log)
    rc = subprocess.run([doxygen, doxyfile], cwd=out).returncode
    warnings = open(log).read().strip() if os.path.exists(log) else ""
    if warnings:
        print(warnings)
        print("build_docs: %d warnings (an undocumented public symbol is one)" % len(warnings.splitlines()))
        sys.exit(1)
    if rc:
        sys.exit("build_docs: doxygen failed (status %d)" % rc)
    print("build_docs: %s" % os.path.join(out, "html", "index.html"))


if __name__ == "__main__":
    main()
