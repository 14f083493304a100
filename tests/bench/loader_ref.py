#!/usr/bin/env python3
"""loader_ref.py - PyTorch's side of tests/bench/bench_loader.c: one epoch of
torchvision's ImageFolder over the same folder (bench_loader writes it) with
RandomCrop(28, padding=2), RandomHorizontalFlip, ToTensor and Normalize,
batch 256, shuffled, num_workers worker processes.

usage: loader_ref.py --dir DIR [--workers W]
prints: workload=loader images=N workers=W torch=... images_per_s=... seconds=...
"""
import argparse
import time

import torch
from torchvision import datasets, transforms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(1)
    tf = transforms.Compose([transforms.RandomCrop(28, padding=2), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    ds = datasets.ImageFolder(a.dir, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=256, shuffle=True, num_workers=a.workers,
                                     generator=torch.Generator().manual_seed(1))
    t0 = time.perf_counter()
    n = 0
    for x, _ in dl:
        n += x.shape[0]
    dt = time.perf_counter() - t0
    print("workload=loader images=%d workers=%d torch=%s images_per_s=%.0f seconds=%.2f" %
          (n, a.workers, torch.__version__, n / dt, dt))


if __name__ == "__main__":
    main()
