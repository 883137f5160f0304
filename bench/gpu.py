"""GPU benchmark (not a test), run by tools/gpu_check.sh on a machine with a CUDA GPU.

In one run: the 6-op pointwise chain at 2^28 float32 elements against the device copy bandwidth
measured in the same run; softmax and layer norm (rows of 4096) against torch eager and
torch.compile; topk(5) of 1000 scores and a sort of 2^16-element rows against the same; index_add
and a scatter_add histogram against the same; uint8 image preprocessing (NHWC bytes to normalized
float32 NCHW) against the same; three reductions over strided rows (flow's GPU column form against
its block per row, torch eager and torch.compile); ResNet-50 inference at batch 64 in float16 NHWC
(flow.jit(amp="float16") with heuristic and exhaustive cuDNN search and with CUDA graphs, against
torch eager with channels_last and autocast, and torch.compile); the floor of that row is the FLOP
count at the H100/H200's dense float16 tensor-core peak (989 TFLOP/s), and the peak device memory
of one ResNet-50 call is reported for flow and torch eager. Times use CUDA events (torch's) around
many launches; results print as a table and go to JSON ($OUT/gpu_bench.json when OUT is set).
Then a U-Net decoder's conv_transpose2d (cuDNN backward data against the zero-stuffed convolution
it replaced), sums over a few long rows (flow gives a row one block: a known gap), and last a video
model's conv3d (cuDNN's N-d convolution against the composition over 2-d ones it replaced).

`--smoke` runs every row at toy sizes without torch.compile, to check the script itself end to end
(on the emulated device of tools/emulated_gpu_pytest.sh, where torch runs on the CPU); its timings
mean nothing and it writes gpu_bench_smoke.json instead.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import flow  # noqa: E402
import torch  # noqa: E402

SMOKE = "--smoke" in sys.argv[1:]
# Where torch runs: the GPU, or the CPU where only flow sees a (emulated) device.
TDEV = "cuda" if torch.cuda.is_available() else "cpu"


def cuda_time(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median seconds per call, timed with CUDA events after a synchronize (host time when torch has
    no device: the smoke run)."""
    if SMOKE:
        repeats, warmup = 2, 1
    for _ in range(warmup):
        fn()
    if TDEV != "cuda":
        times = []
        for _ in range(repeats):
            flow.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            flow.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return sorted(times)[len(times) // 2]
    torch.cuda.synchronize()
    flow.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        flow.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def compiled_time(fn, *args):
    """Seconds per call of torch.compile(fn) on `args`, compiled and warmed first; None in the smoke
    run, or where torch.compile fails (the failure is printed)."""
    if SMOKE:
        return None
    try:
        c = torch.compile(fn)
        c(*args)
        return cuda_time(lambda: c(*args))
    except Exception as e:  # torch.compile may be unavailable on the host
        print("torch.compile failed:", e)
        return None


def save(results: dict) -> None:
    """Writes what is measured so far, so a run cut short by the GPU script's time limit (torch.compile
    of ResNet-50 alone can take minutes on a cold cache) still leaves its earlier figures."""
    out_dir = os.environ.get("OUT", "gpu_out")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpu_bench_smoke.json" if SMOKE else "gpu_bench.json"), "w") as f:
        json.dump(results, f, indent=2)


def peak_bytes(cuda, fn) -> int:
    """Device memory one call of `fn` allocates at its peak beyond what was live before it, read
    through `cuda` (flow.cuda or torch.cuda: flow keeps torch's names)."""
    cuda.synchronize()
    base = cuda.memory_allocated()
    cuda.reset_peak_memory_stats()
    out = fn()
    cuda.synchronize()
    del out
    return cuda.max_memory_allocated() - base


def resnet_rows(results: dict) -> None:
    """ResNet-50 inference at batch 64 in float16, NHWC: flow.jit(amp="float16") (heuristic and
    exhaustive cuDNN search, with and without CUDA graphs) against torch eager (channels_last plus
    autocast) and torch.compile of the same; rows go into results["workloads"], the search
    comparison into results["conv_search"]."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests"))
    from models import loader

    torch.backends.cudnn.benchmark = True  # torch's own algorithm search, its best case
    tmod, fmod = loader.load("resnet", "torch"), loader.load("resnet", "flow")
    torch.manual_seed(0)
    tm, fm = tmod.resnet50().eval(), fmod.resnet50()
    fm.load_state_dict(tm.state_dict())
    fm.eval()
    tm = tm.to(TDEV).to(memory_format=torch.channels_last)
    fm = fm.cuda()
    batch, side = (2, 32) if SMOKE else (64, 224)
    x = torch.randn(batch, 3, side, side, device=TDEV)
    xc = x.contiguous(memory_format=torch.channels_last)
    fx = flow.tensor(x.cpu().numpy()).cuda()

    def torch_eager():
        with torch.no_grad(), torch.autocast(TDEV, dtype=torch.float16):
            return tm(xc)

    ref = torch_eager()
    variants = {}
    for name, kw in (("flow jit (heuristic)", {}), ("flow jit (exhaustive)", {"conv_search": "exhaustive"}),
                     ("flow jit + CUDA graph", {"cuda_graphs": True})):
        try:
            jm = flow.jit(fm, amp="float16", **kw)
            out = jm(fx)
            err = float((torch.as_tensor(out.float().cpu().numpy()) - ref.float().cpu()).abs().max() /
                        ref.float().abs().max().cpu())
            variants[name] = (cuda_time(lambda: jm(fx), repeats=10), err)
            if name == "flow jit (heuristic)":
                results["resnet50_peak_mib"] = {"flow_jit": peak_bytes(flow.cuda, lambda: jm(fx)) / 2**20}
        except Exception as e:  # keep the other figures
            print(f"{name} failed: {type(e).__name__}: {e}")
    t_eager = cuda_time(torch_eager, repeats=10)
    if TDEV == "cuda":
        results.setdefault("resnet50_peak_mib", {})["torch_eager"] = peak_bytes(torch.cuda, torch_eager) / 2**20
    flops = 2 * 4.09e9 * 64  # ResNet-50 multiply-adds at 224x224, times batch

    def add_rows(t_comp):
        results["workloads"] = [r for r in results["workloads"] if not r["name"].startswith("resnet50 b64")]
        for name, (t, err) in variants.items():
            results["workloads"].append({"name": f"resnet50 b64 fp16: {name}", "flow_jit_s": t,
                                         "torch_eager_s": t_eager, "torch_compile_s": t_comp,
                                         "floor_s": flops / 989e12, "max_err": err, "images_per_s": 64 / t})
        save(results)

    add_rows(None)  # before torch.compile, which may not finish in the time left
    if "flow jit (heuristic)" in variants and "flow jit (exhaustive)" in variants:
        results["conv_search"] = {"heuristic_s": variants["flow jit (heuristic)"][0],
                                  "exhaustive_s": variants["flow jit (exhaustive)"][0]}
    t_comp = None
    if not SMOKE:  # torch.compile: minutes of compiling, for no figure in a smoke run
        try:
            comp = torch.compile(tm)

            def torch_compiled():
                with torch.no_grad(), torch.autocast(TDEV, dtype=torch.float16):
                    return comp(xc)

            torch_compiled()
            t_comp = cuda_time(torch_compiled, repeats=10)
        except Exception as e:
            print("torch.compile failed:", e)
    add_rows(t_comp)
    # How the convolutions ran on this device (fused cuDNN calls or the epilogue kernel after them).
    results["library_counters"] = flow.cuda.library_counters()
    print("library calls:", results["library_counters"])
    save(results)


def sort_rows(results: dict, bw: float) -> None:
    """topk(5) of 1000 class scores for 8192 images (one block per row in shared memory) and a full
    sort of 2^16-element rows (global merge steps), against torch eager and torch.compile; the floor
    is reading the input once and writing the result at the copy bandwidth."""
    cases = (("topk 5 of 1000", (64 if SMOKE else 8192, 1000), lambda m, x: m.topk(x, 5, dim=1)),
             ("sort 65536", (4 if SMOKE else 64, 1 << (12 if SMOKE else 16)), lambda m, x: m.sort(x, dim=1)))
    for name, shape, fn in cases:
        x = torch.randn(*shape, device=TDEV)
        fx = flow.tensor(x.cpu().numpy()).cuda()
        fj = flow.jit(lambda a, fn=fn: tuple(fn(flow, a)))
        got_v, got_i = fj(fx)
        want_v, want_i = fn(torch, x)
        err = float((torch.as_tensor(got_v.cpu().numpy()) - want_v.cpu()).abs().max())
        same_idx = bool(torch.equal(torch.as_tensor(got_i.cpu().numpy()), want_i.cpu()))
        tf = cuda_time(lambda: fj(fx))
        tt = cuda_time(lambda: fn(torch, x))
        tc = compiled_time(lambda a, fn=fn: fn(torch, a), x)
        out_elems = want_v.numel()
        floor = (x.numel() * 4 + out_elems * 12) / bw
        results["workloads"].append({"name": name, "flow_jit_s": tf, "torch_eager_s": tt, "torch_compile_s": tc,
                                     "floor_s": floor, "max_err": err, "indices_equal_torch": same_idx})
        save(results)


def scatter_rows(results: dict, bw: float) -> None:
    """The scatter op's two CUDA paths: index_add of 2^20 rows of 64 features into 2^16 rows (64
    lines of 2^20 positions: a thread per position, atomicCAS adds) and a scatter_add histogram of
    2^24 values into 1000 bins (one line: the same path, heavy contention), against torch eager and
    torch.compile; the floor is reading index and source and writing the output once."""
    e, h = (1 << 12, 1 << 14) if SMOKE else (1 << 20, 1 << 24)
    cases = (("index_add 64", [torch.zeros(1 << 16, 64, device=TDEV), torch.randint(0, 1 << 16, (e,), device=TDEV),
                               torch.randn(e, 64, device=TDEV)], lambda m, x, i, v: x.index_add(0, i, v)),
             ("scatter_add hist", [torch.zeros(1000, device=TDEV), torch.randint(0, 1000, (h,), device=TDEV),
                                   torch.randn(h, device=TDEV)], lambda m, x, i, v: x.scatter_add(0, i, v)))
    for name, args, fn in cases:
        fargs = [flow.tensor(a.cpu().numpy()).cuda() for a in args]
        fj = flow.jit(lambda *a, fn=fn: fn(flow, *a))
        got = fj(*fargs)
        want = fn(torch, *args)
        err = float((torch.as_tensor(got.cpu().numpy()) - want.cpu()).abs().max())  # float sums: order differs
        tf = cuda_time(lambda: fj(*fargs))
        tt = cuda_time(lambda: fn(torch, *args))
        tc = compiled_time(lambda *a, fn=fn: fn(torch, *a), *args)
        floor = (sum(a.numel() * a.element_size() for a in args[1:]) + 2 * args[0].numel() * 4) / bw
        results["workloads"].append({"name": name, "flow_jit_s": tf, "torch_eager_s": tt, "torch_compile_s": tc,
                                     "floor_s": floor, "max_err": err})
        save(results)


def preprocess_rows(results: dict, bw: float) -> None:
    """A classifier's input preprocessing on the device: a uint8 NHWC batch of 224 x 224 images to
    normalized float32 NCHW, (x.permute(0, 3, 1, 2).float() / 255 - mean) / std, against torch eager
    and torch.compile; the floor is reading each byte once and writing each float once."""
    batch = 2 if SMOKE else 256
    img = torch.randint(0, 256, (batch, 224, 224, 3), dtype=torch.uint8, device=TDEV)
    mean = torch.tensor([0.485, 0.456, 0.406], device=TDEV).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=TDEV).view(1, 3, 1, 1)
    fimg, fmean, fstd = (flow.from_numpy(t.cpu().numpy()).cuda() for t in (img, mean, std))

    def pre(x, m, s):
        return (x.permute(0, 3, 1, 2).float() / 255 - m) / s

    fj = flow.jit(pre)
    got = fj(fimg, fmean, fstd)
    want = pre(img, mean, std)
    err = float((torch.as_tensor(got.cpu().numpy()) - want.cpu()).abs().max())
    tf = cuda_time(lambda: fj(fimg, fmean, fstd))
    tt = cuda_time(lambda: pre(img, mean, std))
    tc = compiled_time(pre, img, mean, std)
    results["workloads"].append({"name": f"uint8 normalize b{batch}", "flow_jit_s": tf, "torch_eager_s": tt,
                                 "torch_compile_s": tc, "floor_s": img.numel() * 5 / bw, "max_err": err})
    save(results)


def conv_transpose_rows(results: dict) -> None:
    """A U-Net decoder's upsampling, conv_transpose2d of [64, 256, 32, 32] float16 by a 2x2 stride-2
    filter to 128 channels: flow jit (one cuDNN backward-data call) and flow jit through the
    convolution over the zero-stuffed input it used before (4x the multiply-adds), against torch
    eager and torch.compile; the floor is the FLOP count at the dense float16 tensor-core peak."""
    n, cin, cout, hw = (2, 8, 4, 8) if SMOKE else (64, 256, 128, 32)
    dt = torch.float16 if TDEV == "cuda" else torch.float32  # torch's CPU oracle in smoke runs
    x = torch.randn(n, cin, hw, hw, device=TDEV, dtype=dt)
    w = torch.randn(cin, cout, 2, 2, device=TDEV, dtype=dt) * 0.05
    fx = flow.tensor(x.float().cpu().numpy()).cuda().half()
    fw = flow.tensor(w.float().cpu().numpy()).cuda().half()
    fnf = flow.nn.functional
    fj = flow.jit(lambda a, b: fnf.conv_transpose2d(a, b, None, 2))
    fd = flow.jit(lambda a, b: fnf._conv_transpose2d_as_conv2d(a, b, None, [2, 2], [0, 0], [0, 0], [1, 1], 1))
    want = torch.nn.functional.conv_transpose2d(x, w, None, 2).float().cpu()
    err = float((torch.as_tensor(fj(fx, fw).float().cpu().numpy()) - want).abs().max())
    err_d = float((torch.as_tensor(fd(fx, fw).float().cpu().numpy()) - want).abs().max())
    tf = cuda_time(lambda: fj(fx, fw))
    td = cuda_time(lambda: fd(fx, fw))
    tt = cuda_time(lambda: torch.nn.functional.conv_transpose2d(x, w, None, 2))
    tc = compiled_time(lambda a, b: torch.nn.functional.conv_transpose2d(a, b, None, 2), x, w)
    flops = 2 * n * cin * cout * hw * hw * 4
    results["workloads"].append({"name": f"conv_transpose b{n}", "flow_jit_s": tf, "torch_eager_s": tt,
                                 "torch_compile_s": tc, "floor_s": flops / 989e12, "max_err": max(err, err_d),
                                 "flow_jit_zero_stuffed_s": td})
    save(results)


def conv3d_rows(results: dict) -> None:
    """A video model's conv3d + bias + relu, [8, 64, 16, 56, 56] float16 by a 3x3x3 filter to 64
    channels with padding 1: flow jit (one cuDNN N-d convolution, the epilogue fused) and flow jit
    through the composition over 2-d convolutions it ran before (a depth-unfolded copy of the input,
    then one 2-d call), against torch eager and torch.compile; the floor is the FLOP count at the
    dense float16 tensor-core peak."""
    from flow.nn import _functional_3d

    n, c, d, hw = (1, 4, 3, 6) if SMOKE else (8, 64, 16, 56)
    dt = torch.float16 if TDEV == "cuda" else torch.float32  # torch's CPU oracle in smoke runs
    x = torch.randn(n, c, d, hw, hw, device=TDEV, dtype=dt)
    w = torch.randn(c, c, 3, 3, 3, device=TDEV, dtype=dt) * 0.05
    b = torch.randn(c, device=TDEV, dtype=dt)
    fx, fw, fb = (flow.tensor(t.float().cpu().numpy()).cuda().half() for t in (x, w, b))

    def block(m):
        return lambda a, k, bias: m.nn.functional.relu(m.nn.functional.conv3d(a, k, bias, padding=1))

    fj = flow.jit(block(flow))
    got = fj(fx, fw, fb)
    _functional_3d._native_conv = False  # traced now, so this compiled function keeps the composition
    try:
        fd = flow.jit(block(flow))
        got_d = fd(fx, fw, fb)
    finally:
        _functional_3d._native_conv = True
    want = block(torch)(x, w, b).float().cpu()
    err = max(float((torch.as_tensor(g.float().cpu().numpy()) - want).abs().max()) for g in (got, got_d))
    tf = cuda_time(lambda: fj(fx, fw, fb))
    td = cuda_time(lambda: fd(fx, fw, fb))
    tt = cuda_time(lambda: block(torch)(x, w, b))
    tc = compiled_time(block(torch), x, w, b)
    flops = 2 * n * c * c * 27 * d * hw * hw
    results["workloads"].append({"name": f"conv3d b{n}", "flow_jit_s": tf, "torch_eager_s": tt,
                                 "torch_compile_s": tc, "floor_s": flops / 989e12, "max_err": err,
                                 "flow_jit_composed_s": td})
    save(results)


def jit_with_switch_off(fn, switch: str, x):
    """flow.jit(fn) compiled (by a first call on x) with the environment switch `switch` at "0"; the
    switch is restored after. Returns the jitted function and that call's result."""
    before = os.environ.get(switch)
    os.environ[switch] = "0"
    try:
        fj = flow.jit(fn)
        return fj, fj(x)
    finally:
        if before is None:
            del os.environ[switch]
        else:
            os.environ[switch] = before


def time_against_switch(results: dict, name: str, x, fx, fn, switch: str, off_key: str, want, bw: float) -> None:
    """One row: flow.jit of fn(flow, .) on fx, and the same compiled with `switch` off (timed under
    `off_key`), beside torch eager and torch.compile on x; the largest error of either against
    `want`; the floor is reading x once."""
    fj = flow.jit(lambda a: fn(flow, a))
    got = fj(fx)
    fj_off, got_off = jit_with_switch_off(lambda a: fn(flow, a), switch, fx)
    err = max(float((torch.as_tensor(g.cpu().numpy()).double() - want.double()).abs().max()) for g in (got, got_off))
    tf = cuda_time(lambda: fj(fx))
    t_off = cuda_time(lambda: fj_off(fx))
    tt = cuda_time(lambda: fn(torch, x))
    tc = compiled_time(lambda a: fn(torch, a), x)
    results["workloads"].append({"name": name, "flow_jit_s": tf, off_key: t_off, "torch_eager_s": tt,
                                 "torch_compile_s": tc, "floor_s": x.numel() * x.element_size() / bw, "max_err": err})
    save(results)


def column_rows(results: dict, bw: float) -> None:
    """Reductions over strided rows whose neighbours are adjacent in memory, which the heuristics give
    the column form (scheduler/column_reduction.h): ResNet-50's global average pool at batch 64 in
    float16 NHWC, a float32 sum over dim 0 and a mean over the sequence of [32, 512, 768]; flow's
    column form against its block-per-row form (FLOW_GPU_COLUMN_REDUCTION=0, compiled in the same
    run), torch eager and torch.compile; the floor is reading the input once. (Run with the switch
    already at 0, both columns are the row form.)"""
    pool = (4, 2048, 2, 2) if SMOKE else (64, 2048, 7, 7)
    cases = (("avg pool NHWC b64", torch.randn(*pool, device=TDEV).half().contiguous(memory_format=torch.channels_last),
              lambda m, x: x.mean((2, 3))),
             ("sum dim 0 4096x8192", torch.randn(8 if SMOKE else 4096, 8192, device=TDEV), lambda m, x: x.sum(0)),
             ("mean seq 32x512x768", torch.randn(2 if SMOKE else 32, 4 if SMOKE else 512, 4096 if SMOKE else 768,
                                                 device=TDEV), lambda m, x: x.mean(1)))
    for name, x, fn in cases:
        fx = flow.tensor(x.cpu().numpy()).cuda()
        if x.dim() == 4:
            fx = fx.contiguous(memory_format=flow.channels_last)
        time_against_switch(results, name, x, fx, fn, "FLOW_GPU_COLUMN_REDUCTION", "flow_jit_row_form_s",
                            fn(torch, x).float().cpu(), bw)


def long_row_rows(results: dict, bw: float) -> None:
    """Reductions over a few long rows: all 2^28 float32 elements, 8 rows of 2^25, the norm of 4 rows
    of 2^26 and a sum over dim 0 of [2^24, 16] (each row strided; too narrow for the column form, so
    its first reduction reads with a block per strided row). flow splits each into two
    reductions (scheduler/split_reduction.h); the same functions compiled with FLOW_SPLIT_REDUCTIONS=0
    give each row one block, in the same run, beside torch eager, torch.compile and reading the
    input once."""
    n = 1 << (16 if SMOKE else 28)
    for name, x, fn in (("sum 2^28", torch.randn(n, device=TDEV), lambda m, x: x.sum()),
                        ("sum(-1) 8x2^25", torch.randn(8, n // 8, device=TDEV), lambda m, x: x.sum(-1)),
                        ("norm(-1) 4x2^26", torch.randn(4, n // 4, device=TDEV), lambda m, x: (x * x).sum(-1).sqrt()),
                        ("sum(0) 2^24x16", torch.randn(n // 16, 16, device=TDEV), lambda m, x: x.sum(0))):
        time_against_switch(results, name, x, flow.tensor(x.cpu().numpy()).cuda(), fn, "FLOW_SPLIT_REDUCTIONS",
                            "flow_jit_unsplit_s", fn(torch, x.double()).cpu(), bw)


def main() -> None:
    if not flow.cuda.is_available():
        print("bench/gpu.py: no CUDA device; nothing to measure")
        return
    dev = flow.cuda.get_device_name()
    n = 1 << (16 if SMOKE else 28)
    rows, cols = (64 if SMOKE else (1 << 24) // 4096), 4096
    results = {"date": datetime.date.today().isoformat(), "device": dev, "smoke": SMOKE, "workloads": []}

    # Copy bandwidth (torch's device-to-device copy of n floats).
    src = torch.randn(n, device=TDEV)
    dst = torch.empty_like(src)
    t_copy = cuda_time(lambda: dst.copy_(src))
    bw = 2 * n * 4 / t_copy
    print(f"device: {dev}; copy bandwidth {bw / 1e9:.0f} GB/s")

    def chain(m):
        return lambda x, a, b: m.relu(x * a + b) * m.sigmoid(x) + 1.0

    xs = [torch.randn(n, device=TDEV) for _ in range(3)]
    fx = [flow.tensor(t.cpu().numpy()).cuda() for t in xs]
    f_jit = flow.jit(chain(flow))
    out = f_jit(*fx)
    ref = chain(torch)(*xs)
    err = float((torch.as_tensor(out.cpu().numpy()) - ref.cpu()).abs().max())
    t_flow = cuda_time(lambda: f_jit(*fx))
    t_torch = cuda_time(lambda: chain(torch)(*xs))
    t_comp = compiled_time(chain(torch), *xs)
    floor = 4 * n * 4 / bw
    row = {"name": "chain 2^28", "flow_jit_s": t_flow, "torch_eager_s": t_torch, "torch_compile_s": t_comp,
           "floor_s": floor, "fraction_of_copy_bw": floor / t_flow, "max_err": err}
    results["workloads"].append(row)
    save(results)

    def softmax(m):
        return lambda x: m.softmax(x, dim=-1)

    def layernorm(m):
        def f(x, w, b):
            mu = x.mean(-1, keepdim=True)
            d = x - mu
            return d * m.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b
        return f

    x2 = torch.randn(rows, cols, device=TDEV)
    w2 = torch.randn(cols, device=TDEV)
    b2 = torch.randn(cols, device=TDEV)
    for name, make, args in (("softmax 4096", softmax, (x2,)), ("layer norm 4096", layernorm, (x2, w2, b2))):
        fargs = [flow.tensor(a.cpu().numpy()).cuda() for a in args]
        fj = flow.jit(make(flow))
        got = fj(*fargs)
        ref = make(torch)(*args)
        err = float((torch.as_tensor(got.cpu().numpy()) - ref.cpu()).abs().max())
        tf = cuda_time(lambda: fj(*fargs))
        tt = cuda_time(lambda: make(torch)(*args))
        tc = compiled_time(make(torch), *args)
        nbytes = 2 * rows * cols * 4
        results["workloads"].append({"name": name, "flow_jit_s": tf, "torch_eager_s": tt, "torch_compile_s": tc,
                                     "floor_s": nbytes / bw, "max_err": err})
        save(results)

    sort_rows(results, bw)
    scatter_rows(results, bw)
    preprocess_rows(results, bw)
    resnet_rows(results)
    conv_transpose_rows(results)  # after ResNet-50, the row, should the step's time run out
    column_rows(results, bw)  # new, and not a row the issue asks for
    long_row_rows(results, bw)  # new, and not a row the issue asks for
    conv3d_rows(results)  # new, and not a row the issue asks for

    print(f"\n{'workload':18} {'flow jit ms':>12} {'torch ms':>10} {'compile ms':>11} {'floor ms':>9} "
          f"{'eager/flow':>11} {'compile/flow':>13} {'max err':>9}")
    for r in results["workloads"]:
        tc = r["torch_compile_s"]
        print(f"{r['name']:18} {r['flow_jit_s'] * 1e3:12.3f} {r['torch_eager_s'] * 1e3:10.3f} "
              f"{(tc or float('nan')) * 1e3:11.3f} {r['floor_s'] * 1e3:9.3f} "
              f"{r['torch_eager_s'] / r['flow_jit_s']:11.2f} {(tc or float('nan')) / r['flow_jit_s']:13.2f} {r['max_err']:9.1e}")
    for r in results["workloads"]:
        if "flow_jit_row_form_s" in r:
            print(f"{r['name']}: flow jit {r['flow_jit_s'] * 1e3:.3f} ms in the column form, "
                  f"{r['flow_jit_row_form_s'] * 1e3:.3f} ms with a block per row")
        if "flow_jit_unsplit_s" in r:
            print(f"{r['name']}: flow jit {r['flow_jit_s'] * 1e3:.3f} ms split in two reductions, "
                  f"{r['flow_jit_unsplit_s'] * 1e3:.3f} ms with a block per row")
        if "flow_jit_composed_s" in r:
            print(f"{r['name']}: flow jit {r['flow_jit_s'] * 1e3:.3f} ms through cuDNN's N-d convolution, "
                  f"{r['flow_jit_composed_s'] * 1e3:.3f} ms as the composition over 2-d convolutions")
        if "flow_jit_zero_stuffed_s" in r:
            print(f"{r['name']}: flow jit {r['flow_jit_s'] * 1e3:.3f} ms through cuDNN backward data, "
                  f"{r['flow_jit_zero_stuffed_s'] * 1e3:.3f} ms as the zero-stuffed convolution")
    if "resnet50_peak_mib" in results:
        print("resnet50 b64 fp16 peak memory of one call (MiB):",
              ", ".join(f"{k} {v:.0f}" for k, v in results["resnet50_peak_mib"].items()))
    save(results)


if __name__ == "__main__":
    main()
