import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
t = torch.tensor([float(r + 1)])
dist.all_reduce(t)
print(f"rank {r}/{dist.get_world_size()} sum={t.item()} master={os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} agent_store={os.environ.get('TORCHELASTIC_USE_AGENT_STORE')}", flush=True)
dist.destroy_process_group()
