"""A small data-parallel job on CPU (gloo) that fails the way real jobs do.

    torchrun --nproc-per-node 8 train.py SCENARIO

Every rank logs each step, as training scripts do. SCENARIO picks the failure:
  exception  rank 5 raises a KeyError at step 1500 while the others wait in all_reduce
  sigkill    rank 3 is killed with SIGKILL at step 1500 (what the OOM killer does)
  skipped    rank 6 skips one all_reduce at step 1500; the others time out
  nan        rank 2 gets a NaN loss at step 1500 and every rank stops with a ValueError
  straggler  rank 0 runs a long evaluation alone at step 1500, logging its progress, while
             the others wait in the next all_reduce and time out
"""
import time
import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist

FAIL_AT = 1500
scenario = sys.argv[1]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
model = torch.nn.Linear(16, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
batches = {step: torch.randn(8, 16) for step in range(4)}

for step in range(3000):
    x = batches[step % 4] if not (scenario == "exception" and rank == 5 and step == FAIL_AT) else batches[step]
    loss = ddp(x).pow(2).mean()
    if scenario == "nan" and rank == 2 and step == FAIL_AT:
        loss = loss * float("nan")
    opt.zero_grad()
    loss.backward()
    opt.step()
    if scenario == "sigkill" and rank == 3 and step == FAIL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    if scenario == "straggler" and rank == 0 and step == FAIL_AT:
        for batch in range(4000):
            print(f"eval batch {batch}/4000 rank 0 acc {0.5 + batch / 10000:.4f}", flush=True)
            time.sleep(0.012)
    if scenario == "skipped" and step == FAIL_AT:
        if rank != 6:
            dist.all_reduce(torch.ones(1))
    flag = torch.tensor([float(torch.isnan(loss))])
    dist.all_reduce(flag)
    if flag.item() > 0:
        raise ValueError(f"loss is NaN at step {step} on some rank")
    print(f"step {step} rank {rank}/{world} loss {loss.item():.4f} lr 0.0100", flush=True)
dist.destroy_process_group()
