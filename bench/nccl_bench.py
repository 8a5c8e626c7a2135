"""nccl_bench.py -- split arrays on two GPUs through NCCL (issue 30): redjit against one GPU
(weak and strong scaling) and against torch + torch.distributed, every result checked.

    PYTHONPATH=BUILD/python/pkg NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node 2 bench/nccl_bench.py [--quick] [--out FILE.md]

Each rank binds its block of each array (redjit.Split) on its own GPU; rank 0 also times the
one-GPU runs (a redjit context without a communicator) while rank 1 waits.  Times are rank 0's
medians of single calls, each ended by the result on the host or a device synchronisation, in
us, with the ranks lined up by a barrier before each call.  redjit's unique id goes from rank 0
to the others through torch.distributed.broadcast_object_list.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import redjit


def timeit(fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def timeit_alone(fn, reps, rank):
    """One GPU: rank 0 times `fn`, the others wait at the barrier after."""
    t = None
    if rank == 0:
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e6)
        t = statistics.median(ts)
    dist.barrier()
    return t


def block(n, rank, size):
    return n * rank // size, n * (rank + 1) // size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    opt = ap.parse_args()
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)          # redjit takes the current device at its first use
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    box = [redjit.nccl_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    ctx = redjit.Context(device="gpu", nccl_id=box[0], rank=rank, nranks=size)
    one = redjit.Context(device="gpu")    # the same GPU, no communicator
    assert ctx.ranks == (rank, size), ctx.ranks
    lg = 24 if opt.quick else 30
    reps = 5 if opt.quick else 25
    g = torch.Generator(device="cuda")
    g.manual_seed(30 + rank)
    rows, failed = [], 0

    def row(case, times, check, target):
        nonlocal failed
        ok = check if isinstance(check, bool) else bool(check)
        failed += not ok
        if rank == 0:
            rows.append((case, times, ok, target))
            print(f"{case}: " + ", ".join(f"{k} {v:.0f} us" for k, v in times.items() if v is not None)
                  + ("" if ok else "  ** CHECK FAILED **"), flush=True)

    # --- weak scaling: 2^lg f32 per GPU against one GPU holding 2^lg -------------------------
    n = 1 << lg
    x = torch.rand(n, device="cuda", generator=g) * 2 - 1
    y = torch.rand(n, device="cuda", generator=g) * 2 - 1
    e_sum, e_max = ctx.prepare("sum(x)"), ctx.prepare("max(abs(x - y))")
    o_sum, o_max = one.prepare("sum(x)"), one.prepare("max(abs(x - y))")
    X, Y = redjit.Split(x, 0), redjit.Split(y, 0)
    s = float(e_sum(x=X))
    ref = x.double().sum()
    dist.all_reduce(ref)
    mag = x.abs().double().sum()
    dist.all_reduce(mag)
    m = float(e_max(x=X, y=Y))
    mref = (x - y).abs().max()
    dist.all_reduce(mref, op=dist.ReduceOp.MAX)
    for case, e, o, args, good in (
            (f"sum(x), 2^{lg} f32 per GPU", e_sum, o_sum, {"x": X}, abs(s - ref.item()) <= 1e-5 * mag.item()),
            (f"max(abs(x-y)), 2^{lg} f32 per GPU", e_max, o_max, {"x": X, "y": Y}, m == mref.item())):
        t2 = timeit(lambda: float(e(**args)), reps)
        t1 = timeit_alone(lambda: float(o(**{k: v.block for k, v in args.items()})), reps, rank)
        row(case, {"redjit 2 GPUs": t2, "redjit 1 GPU": t1}, good, ("weak", t1, t2))
    # the same measure of torch: its sum and one all_reduce of the value, against its sum on one
    # GPU (what one collective and the ranks' skew cost under this method)

    def torch_sum2():
        v = x.sum()
        dist.all_reduce(v)
        return float(v)

    t2 = timeit(torch_sum2, reps)
    t1 = timeit_alone(lambda: float(x.sum()), reps, rank)
    row(f"  (reference) torch x.sum() + all_reduce, 2^{lg} f32 per GPU", {"torch 2 GPUs": t2, "torch 1 GPU": t1},
        True, ("weakref", t1, t2))

    # --- strong scaling: 2^(lg+1) f32 over 2 GPUs against one GPU holding all of it ----------
    if rank == 0:
        whole = torch.empty(2 * n, device="cuda")
        whole[:n] = x
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x)
    if rank == 0:
        whole[n:] = parts[1] if size > 1 else x
    del parts
    t2 = timeit(lambda: float(e_sum(x=X)), reps)
    t1 = timeit_alone(lambda: float(o_sum(x=whole)), reps, rank)
    good = True
    if rank == 0:
        good = abs(float(o_sum(x=whole)) - s) <= 1e-5 * mag.item()
        del whole
    row(f"sum(x), 2^{lg + 1} f32 over 2 GPUs (strong)", {"redjit 2 GPUs": t2, "redjit 1 GPU": t1}, good,
        ("strong", t1, t2))

    # --- argmax of the split array against torch.max + all_gather --------------------------
    off = n * rank
    e_arg = ctx.prepare("argmax(x)")

    def torch_argmax():
        v, i = torch.max(x, 0)
        vi = torch.stack([v.double(), (i + off).double()])
        out = [torch.empty_like(vi) for _ in range(size)]
        dist.all_gather(out, vi)
        a = torch.stack(out)
        return int(a[torch.argmax(a[:, 0]), 1].item())

    got, want = int(e_arg(x=X)), torch_argmax()
    row(f"argmax(x), 2^{lg} f32 per GPU", {"redjit": timeit(lambda: int(e_arg(x=X)), reps),
                                           "torch+all_gather": timeit(torch_argmax, reps)}, got == want, ("peer",))
    del y

    # --- column sums of a row-split matrix ---------------------------------------------------
    cols = 1 << (12 if opt.quick else 15)
    r0, r1 = block(cols, rank, size)
    A = torch.rand(r1 - r0, cols, device="cuda", generator=g)
    e_col = ctx.prepare("sum(A[i,j]) over i")

    def torch_cols():
        c = A.sum(0)
        dist.all_reduce(c)
        return c

    got, want = e_col(A=redjit.Split(A, 0)), torch_cols()
    colmag = A.abs().sum(0)
    dist.all_reduce(colmag)
    good = bool(((torch.as_tensor(got, device="cuda") - want).abs() <= 1e-5 * colmag).all().item())
    row(f"column sums, {cols}x{cols} f32 split by rows", {"redjit": timeit(lambda: e_col(A=redjit.Split(A, 0)), reps),
                                                          "torch+all_reduce": timeit(torch_cols, reps)}, good, ("peer",))
    # the breakdown: the same block's column sums on one GPU, without the ranks
    o_col = one.prepare("sum(A[i,j]) over i")
    row(f"  (breakdown) column sums of one rank's {r1 - r0}x{cols} block, one GPU",
        {"redjit": timeit_alone(lambda: o_col(A=A), reps, rank), "torch A.sum(0)": timeit_alone(lambda: A.sum(0), reps, rank)},
        True, ("info",))
    del A

    # the breakdown: what a split run costs beyond its kernels (a tiny array), and NCCL's floor
    tiny = x[:1024].contiguous()
    one_float = torch.zeros(1, device="cuda")
    row("  (breakdown) sum(x) of 1024 f32 per GPU: the split run's own cost",
        {"redjit 2 GPUs": timeit(lambda: float(e_sum(x=redjit.Split(tiny, 0))), reps),
         "redjit 1 GPU": timeit_alone(lambda: float(o_sum(x=tiny)), reps, rank),
         "torch all_reduce of 1 float": timeit(lambda: dist.all_reduce(one_float), reps)},
        True, ("info",))

    # --- an ordered user operator: affine maps modulo a prime, exact, against one GPU -----------
    na = 1 << (lg - 3)
    P = 2147483647
    a = torch.randint(1, P, (na,), device="cuda", generator=g, dtype=torch.int64)
    b = torch.randint(0, P, (na,), device="cuda", generator=g, dtype=torch.int64)
    text = (f"ordered op aff(p, q) = (p.0 * q.0 % {P}, (p.1 * q.0 + q.1) % {P}) identity (1, 0)\n"
            "reduce(aff, (a[i], b[i])) over i")
    e_aff, o_aff = ctx.prepare(text), one.prepare(text)
    got = [int(v) for v in e_aff(a=redjit.Split(a, 0), b=redjit.Split(b, 0))]
    pa, pb = [torch.empty_like(a) for _ in range(size)], [torch.empty_like(b) for _ in range(size)]
    dist.all_gather(pa, a)
    dist.all_gather(pb, b)
    wa, wb = torch.cat(pa), torch.cat(pb)
    del pa, pb
    want = [int(v) for v in o_aff(a=wa, b=wb)]
    del wa, wb
    t2 = timeit(lambda: e_aff(a=redjit.Split(a, 0), b=redjit.Split(b, 0)), reps)
    t1 = timeit_alone(lambda: o_aff(a=a, b=b), reps, rank)
    row(f"ordered affine maps mod p, 2^{lg - 3} i64 pairs per GPU", {"redjit 2 GPUs": t2, "redjit 1 GPU": t1},
        got == want, ("weak", t1, t2))

    if rank == 0:
        lines = [f"| case | times (us) | ratio | target | check |", "|---|---|---|---|---|"]
        for case, times, ok, target in rows:
            ts = ", ".join(f"{k} {v:.0f}" for k, v in times.items() if v is not None)
            vals = list(times.values())
            if target[0] == "info":
                ratio, goal = "", "(where the time goes)"
            elif target[0] == "weakref":
                ratio, goal = f"{target[2] / target[1]:.3f}x one GPU", "(the peer, measured alike)"
            elif target[0] == "weak":
                ratio, goal = f"{target[2] / target[1]:.3f}x one GPU", "at most 1.05x (1.1x ordered)"
            elif target[0] == "strong":
                ratio, goal = f"{target[1] / target[2]:.2f}x faster", "at least 1.85x"
            else:
                ratio, goal = f"{vals[1] / vals[0]:.2f}x the peer", "at least 1.0x"
            lines.append(f"| {case} | {ts} | {ratio} | {goal} | {'ok' if ok else 'FAILED'} |")
        table = "\n".join(lines)
        print(table)
        if opt.out:
            with open(opt.out, "w") as f:
                f.write(f"{torch.cuda.get_device_name()} x{size}, NCCL through redjit.Context(nccl_id=...), "
                        f"torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}\n\n{table}\n")
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
