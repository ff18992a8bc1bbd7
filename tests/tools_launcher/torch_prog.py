"""A plain torch.distributed program, unchanged from what users run under
torchrun: gloo, env:// (or its own TCPStore on MASTER_ADDR:MASTER_PORT).

usage: torch_prog.py env|tcp [KILL_RANK]
In restart 0, KILL_RANK SIGKILLs itself after the first all_reduce."""
import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist

mode = sys.argv[1]
kill_rank = int(sys.argv[2]) if len(sys.argv) > 2 else -1
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if mode == "env":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
else:
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          rank == 0, datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
assert dist.get_rank() == rank and dist.get_world_size() == world
small = torch.tensor([float(rank + 1)])
dist.all_reduce(small)
if rank == kill_rank and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
    os.kill(os.getpid(), signal.SIGKILL)
big = torch.arange(1 << 16, dtype=torch.float32) * (rank + 1)
dist.all_reduce(big)
want = world * (world + 1) / 2
ok = small.item() == want and torch.equal(big, torch.arange(1 << 16, dtype=torch.float32) * want)
os.write(1, f"torch {'ok' if ok else 'WRONG'} rank {rank}/{world} sum={small.item():g} "
            f"restart={os.environ.get('TORCHELASTIC_RESTART_COUNT')}\n".encode())
dist.destroy_process_group()
sys.exit(0 if ok else 1)
