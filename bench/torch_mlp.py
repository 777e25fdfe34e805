# SPDX-License-Identifier: BSD-2-Clause
# A small PyTorch training loop for bench/torch_view.py: an MLP on random data, one intra-op
# thread, SGD, for SECONDS of training after the imports (default 15).
import sys
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(64, 256)
y = torch.randint(0, 10, (64,))


def train_step():
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss


end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 15)
steps = 0
while time.monotonic() < end:
    train_step()
    steps += 1
print(f"{steps} steps", flush=True)
