import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
t = torch.tensor([float(r + 1)])
dist.all_reduce(t)
# One write(2) per line: the ranks share torchrun's pipe, and print()'s
# separate writes of text and newline interleave between processes.
os.write(1, f"rank {r}/{dist.get_world_size()} sum={t.item()} master={os.environ.get('MASTER_ADDR')}:"
            f"{os.environ.get('MASTER_PORT')} agent_store={os.environ.get('TORCHELASTIC_USE_AGENT_STORE')}\n"
            .encode())
dist.destroy_process_group()
