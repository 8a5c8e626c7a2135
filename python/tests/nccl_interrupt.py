"""nccl_interrupt.py -- Ctrl-C while a rank waits in a collective another rank never joins, on
two GPUs (scripts/device-check.sh split runs it under torchrun --nproc_per_node 2):

rank 0 runs a split sum whose hello rank 1 never enters and signals itself 0.5 s and 1 s in
(Ctrl-C twice: one alone waits 10 s for a slower rank); the run must end with KeyboardInterrupt
right after the second (the communicator aborted), and the next run must raise an error that
says so.  Rank 1 sleeps, then leaves without running.  Exit 0 when
rank 0 saw both."""
import os
import signal
import sys
import threading
import time

signal.signal(signal.SIGINT, signal.default_int_handler)   # (before redjit puts its handler in front)

import torch                      # noqa: E402
import torch.distributed as dist  # noqa: E402

import redjit                     # noqa: E402

rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
box = [redjit.nccl_unique_id() if rank == 0 else None]
dist.broadcast_object_list(box, src=0)
ctx = redjit.Context(device="gpu", nccl_id=box[0], rank=rank, nranks=size)
x = torch.rand(1 << 20, device="cuda")
e = ctx.prepare("sum(x)")
float(e(x=redjit.Split(x, 0)))    # both ranks: compiled, NCCL's channels up
dist.barrier()
if rank != 0:
    time.sleep(6)
    os._exit(0)                   # (no collective at exit: rank 0's communicator is gone)
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.time()
ok = False
try:
    e(x=redjit.Split(x, 0))
    print("nccl_interrupt: FAILED: the run ended", flush=True)
except KeyboardInterrupt:
    took = time.time() - t0
    ok = took < 4
    print(f"nccl_interrupt: KeyboardInterrupt after {took:.2f} s", flush=True)
try:
    e(x=redjit.Split(x, 0))
    ok = False
    print("nccl_interrupt: FAILED: a run after the abort worked", flush=True)
except redjit.Error as ex:
    ok = ok and "aborted" in str(ex)
    print(f"nccl_interrupt: the next run: {ex}", flush=True)
print("nccl_interrupt:", "passed" if ok else "FAILED", flush=True)
os._exit(0 if ok else 1)
