#!/usr/bin/env python3
"""ddp_ref.py - PyTorch's DistributedDataParallel on torch_ref.py's
workloads, the reference for nabla's `bench_* --distributed` (weak scaling:
every rank steps its own batch of the workload's size).

    torchrun --nproc_per_node N tests/bench/ddp_ref.py bert-base --tf32 [--amp]

Each rank uses cuda:LOCAL_RANK and NCCL; rank 0 prints one line in
torch_ref.py's format plus world=N. The model, data and optimizer come from
torch_ref.py's workload() (found beside the checkout in shared/bench, or at
$TORCH_REF), wrapped in DDP(device_ids=[local_rank]) with PyTorch's default
25 MiB buckets. Each timed step ends with a device synchronize, as
torch_ref.py's."""
import argparse, importlib.util, math, os, statistics, time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def load_torch_ref():
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.environ.get("TORCH_REF", "")] + [
        os.path.join(here, *([".."] * k), "shared", "bench", "torch_ref.py") for k in (3, 4)
    ] + [os.path.join(here, "..", "..", ".dev", "torch_ref.py")]
    for c in cands:
        if c and os.path.isfile(c):
            spec = importlib.util.spec_from_file_location("torch_ref", c)
            m = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(m)
            return m
    raise SystemExit("ddp_ref.py: torch_ref.py not found (set TORCH_REF)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["mlp", "cnn", "bert", "bert-base"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--amp", action="store_true")
    a = ap.parse_args()
    ref = load_torch_ref()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    dev = f"cuda:{local}"
    m, x, y, opt_ref = ref.workload(a.workload, dev)
    lr = opt_ref.param_groups[0]["lr"]
    model = DDP(m, device_ids=[local])
    opt = type(opt_ref)(model.parameters(), lr=lr)
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.amp)
    times = []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize(); t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with amp:
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize(); dt = (time.perf_counter() - t) * 1e3
        if i >= a.warmup:
            times.append(dt)
    assert math.isfinite(loss.item())
    world = dist.get_world_size()
    if dist.get_rank() == 0:
        mode = "+".join(k for k in ("tf32", "amp") if getattr(a, k)) or "fp32"
        print(f"workload={a.workload} device=cuda mode={mode} world={world} torch={torch.__version__} "
              f"ddp median_ms={statistics.median(times):.3f} min_ms={min(times):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
