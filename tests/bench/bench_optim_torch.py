#!/usr/bin/env python3
"""bench_optim_torch.py - PyTorch's side of bench_optim: the optimizer step
alone over the mlp workload's parameters (784-512-512-10, float32) with fixed
gradients, for every torch.optim optimizer this torch has, with foreach off
(the single-tensor loops) and on.

    OMP_NUM_THREADS=2 python3 tests/bench/bench_optim_torch.py [threads] [steps]
"""
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.set_num_threads(threads)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                          torch.nn.Linear(512, 10))
for p in net.parameters():
    p.grad = torch.randn_like(p)
KINDS = [("SGD", dict(lr=1e-3, momentum=0.9)), ("Adam", {}), ("AdamW", {}), ("Adadelta", {}), ("Adafactor", {}),
         ("Adagrad", {}), ("Adamax", {}), ("ASGD", {}), ("NAdam", {}), ("RAdam", {}), ("RMSprop", dict(momentum=0.9)),
         ("Rprop", {}), ("Muon", {})]
for name, kw in KINDS:
    if not hasattr(torch.optim, name):
        continue
    for foreach in (False, True):
        params = [p for p in net.parameters() if name != "Muon" or p.dim() == 2]
        try:
            opt = getattr(torch.optim, name)(params, foreach=foreach, **kw)
        except (TypeError, RuntimeError):
            continue
        ms = []
        for i in range(3 + steps):
            t = time.perf_counter()
            opt.step()
            if i >= 3:
                ms.append(1e3 * (time.perf_counter() - t))
        ms.sort()
        print("workload=optim-%s torch %s foreach=%s threads=%d median_ms=%.3f min_ms=%.3f" % (
            name, torch.__version__, foreach, threads, ms[len(ms) // 2], ms[0]))
