#!/usr/bin/env python3
"""image_interop.py DIR - PIL's side of tests/test_image.c.

Writes images with PIL into DIR/pil (PNG: RGB, RGBA, L, LA, P; JPEG:
RGB, L, progressive) and, for each, the arrays PIL decodes them to:
<name>.rgb.npy (convert("RGB")), <name>.l.npy (convert("L")) and
<name>.raw.npy (the file's own mode; palettes expanded to RGB or RGBA), all
[C, H, W] uint8. Then decodes the images nabla wrote into DIR (nabla_*.png,
nabla_*.jpg) and saves what PIL reads as <file>.pil.npy, for the C side to
compare with its own decoding. Exit 77: no PIL or NumPy.
"""
import os
import sys

try:
    import numpy as np
    from PIL import Image
except ImportError:
    sys.exit(77)


def chw(a):
    a = np.asarray(a)
    if a.ndim == 2:
        a = a[:, :, None]
    return np.ascontiguousarray(a.transpose(2, 0, 1)).astype(np.uint8)


def pattern(h, w, c):
    y, x, k = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    return ((x * 37 + y * 11 + k * 71 + (x * y) % 13) % 256).astype(np.uint8)


def main():
    d = sys.argv[1]
    out = os.path.join(d, "pil")
    os.makedirs(out, exist_ok=True)
    rgb = Image.fromarray(pattern(21, 34, 3), "RGB")
    images = {
        "rgb.png": rgb,
        "rgba.png": Image.fromarray(pattern(21, 34, 4), "RGBA"),
        "l.png": Image.fromarray(pattern(21, 34, 1)[:, :, 0], "L"),
        "la.png": Image.fromarray(pattern(21, 34, 2), "LA"),
        "p.png": rgb.quantize(16),
        "rgb.jpg": rgb,
        "l.jpg": Image.fromarray(pattern(21, 34, 1)[:, :, 0], "L"),
        "prog.jpg": rgb,
    }
    for name, im in images.items():
        path = os.path.join(out, name)
        if name.endswith(".jpg"):
            im.save(path, quality=90, progressive=name.startswith("prog"))
        else:
            im.save(path)
        with Image.open(path) as f:
            f.load()
            np.save(path + ".rgb.npy", chw(f.convert("RGB")))
            np.save(path + ".l.npy", chw(f.convert("L")))
            raw = f.convert("RGBA" if "transparency" in f.info else "RGB") if f.mode == "P" else f
            np.save(path + ".raw.npy", chw(raw))
    for name in sorted(os.listdir(d)):
        if name.startswith("nabla_"):
            with Image.open(os.path.join(d, name)) as f:
                f.load()
                np.save(os.path.join(d, name + ".pil.npy"), chw(f))
    print("image_interop: ok")


if __name__ == "__main__":
    main()
