#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""CPU workloads of the kind profd is built for, for bench/torch_stacks.py and the numpy e2e test.

  torch_work.py --workload mlp [--seconds S]     an MLP training loop: torch.set_num_threads(1),
                                                 batches from a DataLoader with two workers
  torch_work.py --workload conv [--seconds S]    a small conv net and a 2-layer
                                                 nn.TransformerEncoder, trained together
  torch_work.py --workload numpy [--seconds S]   a numpy matmul loop (run it with
                                                 OPENBLAS_NUM_THREADS=1: one BLAS thread)

It imports and builds everything, runs a few warm-up steps, then prints "training PID" (flushed)
on stdout and trains on the main thread for S seconds (default 30; 0: until killed). A profiler
started on PID after that line sees the main thread in training steps only: each step is
train_step(), whose `loss.backward()` line is where autograd's engine runs.
"""
import argparse
import os
import sys
import time


def mlp(args):
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Synthetic(Dataset):
        # Batches made in the workers, so they run while the main thread trains.
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return torch.randn(256, generator=g), int(i % 10)

    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(Synthetic(), batch_size=64, num_workers=2)
    return loader, model, opt, loss_fn


def conv(args):
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Synthetic(Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return torch.randn(3, 32, 32, generator=g), int(i % 10)

    class Net(nn.Module):
        # Conv features of a 32x32 image as a sequence of 64 tokens for the transformer.
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                                      nn.ReLU(), nn.MaxPool2d(2))
            layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2)
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            x = self.conv(x)                      # (B, 64, 8, 8)
            x = x.flatten(2).transpose(1, 2)      # (B, 64 tokens, 64)
            return self.head(self.encoder(x).mean(1))

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(Synthetic(), batch_size=32, num_workers=2)
    return loader, model, opt, loss_fn


def train_step(model, opt, loss_fn, x, y):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss


def run_torch(args, build):
    loader, model, opt, loss_fn = build(args)
    it = iter(loader)
    for _ in range(3):
        train_step(model, opt, loss_fn, *next(it))
    ready()
    end = deadline(args)
    while time.monotonic() < end:
        train_step(model, opt, loss_fn, *next(it))


def matmul(a, b):
    return a @ b


def run_numpy(args):
    import numpy as np

    rng = np.random.default_rng(0)
    # Large enough that nearly all of a step is in the BLAS kernel (dgemm), as in a real job.
    a = rng.standard_normal((args.n, args.n))
    b = rng.standard_normal((args.n, args.n))
    matmul(a, b)
    ready()
    end = deadline(args)
    while time.monotonic() < end:
        matmul(a, b)


def ready():
    print(f"training {os.getpid()}", flush=True)


def deadline(args):
    return time.monotonic() + args.seconds if args.seconds > 0 else float("inf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True, choices=("mlp", "conv", "numpy"))
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--n", type=int, default=384, help="numpy: the matrices' size (n x n)")
    args = ap.parse_args()
    if not 0 <= args.seconds <= 3600 or not 16 <= args.n <= 4096:
        sys.exit("torch_work.py: --seconds 0-3600, --n 16-4096")
    if args.workload == "numpy":
        run_numpy(args)
    else:
        run_torch(args, mlp if args.workload == "mlp" else conv)


if __name__ == "__main__":
    main()
