"""GPU tests (marker `gpu`): flow's generated CUDA kernels run on the device and are compared with
PyTorch on CUDA. Run by tools/gpu_check.sh on a machine with a GPU; skipped (as a whole) where
flow finds no CUDA device. Outputs are poisoned (FLOW_POISON_OUTPUTS=1, set below before the first
allocation) so an element a kernel fails to write shows up as NaN / -1.
"""
import os

os.environ.setdefault("FLOW_POISON_OUTPUTS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import flow  # noqa: E402
from conftest import TDEV, kernel_lookups  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80]),
]

# The emulated device (tests/cpp/simt/emulated_driver.cpp) computes on the host: a test whose size is
# the point (products of 4096 x 4096 matrices) is left to real devices.
EMULATED = flow.cuda.is_available() and "emulated" in flow.cuda.get_device_name()

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
FLOW_OF = {torch.float32: flow.float32, torch.float16: flow.float16, torch.bfloat16: flow.bfloat16}
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


def to_flow_cuda(t: torch.Tensor) -> "flow.Tensor":
    """A flow CUDA tensor with t's values (through the host: flow and torch keep separate memory)."""
    # Conversions run on the device: the GPU build (no LLVM) runs CPU kernels on the slow interpreter.
    c = t.detach().cpu()
    if c.dtype == torch.bfloat16:
        return flow.tensor(c.float().numpy()).cuda().to(flow.bfloat16)
    return flow.tensor(c.numpy()).cuda()


def to_torch(f: "flow.Tensor") -> torch.Tensor:
    if f.dtype is flow.bfloat16:
        return torch.from_numpy(f.float().cpu().numpy()).to(torch.bfloat16)
    return torch.from_numpy(f.cpu().numpy())


def check(got: "flow.Tensor", want: torch.Tensor, dtype=torch.float32, atol_floor: float = 0.0):
    """`atol_floor`: an absolute tolerance at least this large (a sum's rounding scales with the
    magnitudes it adds, not with its result)."""
    assert got.device.type == "cuda"
    g = to_torch(got)
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    rtol, atol = TOL.get(dtype, (2e-5, 2e-5))
    atol = max(atol, atol_floor)
    torch.testing.assert_close(g.float(), want.detach().cpu().float(), rtol=rtol, atol=atol, equal_nan=True)


UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("n", [1, 7, 1031, (1 << 20) + 3])
def test_unary(op, dtype, n):
    x = torch.randn(n, device=TDEV, dtype=dtype)
    if op in ("log", "sqrt", "rsqrt"):
        x = x.abs() + 0.1
    want = getattr(torch, op)(x) if hasattr(torch, op) else getattr(torch.nn.functional, op)(x)  # silu
    check(getattr(flow, op)(to_flow_cuda(x)), want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_binary_broadcast(op, dtype):
    a = torch.randn(33, 1, 65, device=TDEV, dtype=dtype)
    b = torch.randn(7, 65, device=TDEV, dtype=dtype)
    check(getattr(flow, op)(to_flow_cuda(a), to_flow_cuda(b)), getattr(torch, op)(a, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_both_forms(dtype):
    x = torch.randn(4099, device=TDEV, dtype=dtype)
    fx = to_flow_cuda(x)
    check(flow.nn.functional.gelu(fx), torch.nn.functional.gelu(x), dtype)
    check(flow.nn.functional.gelu(fx, approximate="tanh"), torch.nn.functional.gelu(x, approximate="tanh"), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_eager_cat_is_copies(dtype, dim):
    """Eager cat on the device is one 2-D copy per input (jit/eager_cat.h): no kernel for
    contiguous inputs of the output's dtype, whatever their number; the others go through the
    cast kernel first."""
    g = torch.Generator().manual_seed(11)
    shape = [3, 5, 7]
    ts = []
    for k in range(23):
        s = list(shape)
        s[dim] = k % 4  # empty inputs too
        ts.append(torch.randn(*s, generator=g).to(dtype))
    fs = [to_flow_cuda(t) for t in ts]

    before = kernel_lookups()
    got = flow.cat(fs, dim)
    assert kernel_lookups() == before
    check(got, torch.cat(ts, dim), dtype)
    # Another dtype and a transposed input: cast kernels first, then copies.
    odd = [to_flow_cuda(ts[1].double()).to(flow.float64), to_flow_cuda(ts[2].transpose(0, 2).contiguous()).transpose(0, 2)]
    want = torch.cat([ts[1].double(), ts[2].double()], dim)
    torch.testing.assert_close(to_torch(flow.cat(odd, dim)), want, rtol=0, atol=0)


def test_non_contiguous_inputs():
    x = torch.randn(65, 129, device=TDEV)
    fx = to_flow_cuda(x)
    check(flow.exp(fx.t()), torch.exp(x.t()))          # transposed view
    check(flow.relu(fx[:, 1::2]), torch.relu(x[:, 1::2]))  # strided slice


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((1, 1), -1), ((7, 33), -1), ((64, 4096), -1), ((33, 65), 0), ((5, 6, 7), 1)])
def test_reductions_and_softmax(shape, dim, dtype):
    x = torch.randn(*shape, device=TDEV, dtype=dtype)
    fx = to_flow_cuda(x)
    # Summation order differs between flow and torch: float32 rounding up to about n * eps of the
    # sum of magnitudes (a cancelling sum may be small beside it).
    abs_sum = float(x.float().abs().sum(dim=dim).max())
    n = x.shape[dim]
    check(flow.sum(fx, dim=dim), torch.sum(x, dim=dim), dtype, atol_floor=4e-7 * abs_sum)
    check(flow.mean(fx, dim=dim, keepdim=True), torch.mean(x, dim=dim, keepdim=True), dtype,
          atol_floor=4e-7 * abs_sum / n)
    check(flow.amax(fx, dim=dim), torch.amax(x, dim=dim), dtype)
    check(flow.softmax(fx, dim=dim), torch.softmax(x, dim=dim), dtype)
    check(flow.log_softmax(fx, dim=dim), torch.log_softmax(x, dim=dim), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_over_adjacent_strided_rows(dtype):
    """Reductions whose rows are strided while adjacent rows are contiguous, with rows enough for
    the GPU column form (scheduler/column_reduction.h: 8192 or more, a warp of them adjacent): an
    NHWC average pool, sums and var over dim 0 (a short last tile of 32 rows), a mean over a middle
    dim, amax with a NaN; eagerly and jitted."""
    pool = torch.randn(4, 2048, 3, 3, device=TDEV, dtype=dtype).contiguous(memory_format=torch.channels_last)
    fpool = to_flow_cuda(pool).contiguous(memory_format=flow.channels_last)
    check(fpool.mean((2, 3)), pool.mean((2, 3)), dtype)
    check(flow.jit(lambda a: a.mean((2, 3), keepdim=True) * 2)(fpool), pool.mean((2, 3), keepdim=True) * 2, dtype)
    x = torch.randn(5, 8200, device=TDEV, dtype=dtype)
    x[3, 4100] = float("nan")
    fx = to_flow_cuda(x)
    abs_sum = float(x.float().abs().nan_to_num().sum(0).max())
    check(flow.sum(fx, 0), torch.sum(x, 0), dtype, atol_floor=4e-7 * abs_sum)
    check(flow.amax(fx, 0), torch.amax(x, 0), dtype)
    check(flow.jit(lambda a: a.var(0))(fx), x.var(0), dtype)
    y = torch.randn(3, 7, 4096, device=TDEV, dtype=dtype)
    check(flow.mean(to_flow_cuda(y), 1), y.mean(1), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_over_a_few_long_rows(dtype):
    """A few long rows (scheduler/split_reduction.h): fewer than 512 rows of 65536 or more elements
    reduce in two steps, S blocks per row and then the S partials. Eagerly and jitted: sums and
    means of everything and of rows, amax with a NaN, softmax, var, a root mean square whose square
    r1 computes as it reads, and a sum over dim 0 with each row strided."""
    x = torch.randn(2, 1 << 17, device=TDEV, dtype=dtype)
    fx = to_flow_cuda(x)
    abs_sum = float(x.float().abs().sum())
    # The whole-tensor references are float64's, rounded once: torch's CPU reduction of every element
    # of a half tensor rounds each thread's partial to the half type (a bfloat16 sum of these 2^18
    # elements was 3 ulps from the exact one), which the emulated run's CPU oracle would inherit.
    check(fx.sum(), x.double().sum().to(dtype), dtype, atol_floor=4e-7 * abs_sum)
    flow.reset_launch_count()
    fx.sum()
    assert flow.launch_count() == 2  # eager splits too: S blocks, then one
    check(fx.mean(), x.double().mean().to(dtype), dtype, atol_floor=4e-7 * abs_sum / x.numel())
    check(fx.sum(-1, keepdim=True), x.sum(-1, keepdim=True), dtype, atol_floor=4e-7 * abs_sum)
    y = x.clone()
    y[1, 70000] = float("nan")
    check(flow.amax(to_flow_cuda(y), -1), torch.amax(y, -1), dtype)
    check(flow.amin(fx, -1), torch.amin(x, -1), dtype)
    check(flow.softmax(fx, -1), torch.softmax(x, -1), dtype)
    softmax = flow.jit(lambda a: flow.softmax(a, -1))
    check(softmax(fx), torch.softmax(x, -1), dtype)
    assert softmax.explain().count("split reduction") == 2, softmax.explain()  # amax and sum
    norm = flow.jit(lambda a: (a * a).mean(-1).sqrt())  # a root mean square: no half overflow
    check(norm(fx), (x * x).mean(-1).sqrt(), dtype)
    assert norm.num_kernels == 2, norm.explain()
    assert "split reduction" in norm.explain()
    check(flow.jit(lambda a: a.var(-1))(fx), x.var(-1), dtype)
    z = torch.randn(1 << 16, 8, device=TDEV, dtype=dtype)
    column_sum = flow.jit(lambda a: a.sum(0))
    check(column_sum(to_flow_cuda(z)), z.sum(0), dtype, atol_floor=4e-7 * float(z.float().abs().sum(0).max()))
    assert "split reduction" in column_sum.explain()


def test_jit_chain_softmax_layernorm_on_gpu():
    def chain(m):
        return lambda x, a, b: m.relu(x * a + b) * m.sigmoid(x) + 1.0

    def rownorm(m):
        def f(x, w, b):
            mu = x.mean(-1, keepdim=True)
            d = x - mu
            return d * m.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b
        return f

    xs = [torch.randn(1 << 20, device=TDEV) for _ in range(3)]
    f = flow.jit(chain(flow))
    out = f(*[to_flow_cuda(t) for t in xs])
    check(out, chain(torch)(*xs))
    assert f.num_kernels == 1
    assert "__global__" in f.explain()

    x = torch.randn(256, 4096, device=TDEV)
    w = torch.randn(4096, device=TDEV)
    b = torch.randn(4096, device=TDEV)
    g = flow.jit(rownorm(flow))
    check(g(to_flow_cuda(x), to_flow_cuda(w), to_flow_cuda(b)), rownorm(torch)(x, w, b))
    assert g.num_kernels == 1


def matmul_chain(x, w):
    """Eight matrix products in a row: each intermediate is dead once the next product has read it."""
    for _ in range(8):
        x = x @ w
    return x


def matmul_chain_inputs(n: int):
    x = torch.randn(n, n, device=TDEV)
    w = torch.randn(n, n, device=TDEV) / n ** 0.5
    return x, w, to_flow_cuda(x), to_flow_cuda(w)


def test_jit_run_frees_intermediates_after_last_use():
    # A chain of 8 matrix products: each intermediate is dead once the next product has read it, so
    # a run's peak is a few intermediates, not all seven (CUDA runs drop them as CPU runs do; the
    # caching allocator's stream order makes the reuse safe while kernels are in flight).
    n, mb = 1024, 1024 * 1024 * 4
    x, w, fx, fw = matmul_chain_inputs(n)
    f = flow.jit(matmul_chain)
    first = f(fx, fw)  # compiles, allocates the library workspaces
    del first
    flow.cuda.synchronize()
    base = flow.cuda.memory_allocated()
    flow.cuda.reset_peak_memory_stats()
    out = f(fx, fw)
    flow.cuda.synchronize()
    peak = flow.cuda.max_memory_allocated() - base
    assert mb <= peak <= 3 * mb, (peak / mb, "intermediates of 4 MiB held at once")
    torch.testing.assert_close(to_torch(out), matmul_chain(x, w).cpu(), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(EMULATED, reason="68 GFLOP per product: too slow for the emulated device")
def test_cuda_graph_holds_its_working_set_not_every_intermediate():
    # Captured, the same chain's freed intermediates are reused within the capture (the graph
    # replays each last read before the next write), so the graph keeps about its working set:
    # static inputs (2), one held intermediate and the static output, where holding all seven
    # intermediates would be ten blocks. (64 MiB blocks: a 32 MiB library workspace the capture
    # stream may allocate stays below the bound either way.)
    n, mb = 4096, 4096 * 4096 * 4
    x, w, fx, fw = matmul_chain_inputs(n)
    f = flow.jit(matmul_chain, cuda_graphs=True)
    f(fx, fw)  # warms up (the result is dropped at once)
    flow.cuda.synchronize()
    base = flow.cuda.memory_allocated()
    out = f(fx, fw)  # captures and launches
    flow.cuda.synchronize()
    assert f.executable.graph_captured, f.explain()[:2000]
    kept = flow.cuda.memory_allocated() - base - mb  # less the returned output
    assert kept <= 5 * mb, (kept / mb, "blocks kept by the graph")
    torch.testing.assert_close(to_torch(out), matmul_chain(x, w).cpu(), rtol=1e-3, atol=1e-3)
    out2 = f(fx, fw)
    assert f.executable.num_graph_replays == 1
    torch.testing.assert_close(to_torch(out2), to_torch(out), rtol=0, atol=0)


def test_mixed_devices_raise():
    with pytest.raises(RuntimeError, match="same device"):
        flow.add(flow.ones(3).cuda(), flow.ones(3))
    # except a 0-dim CPU tensor, which torch lets meet CUDA tensors (a "CPU scalar")
    out = flow.add(flow.ones(3).cuda(), flow.tensor(2.0))
    assert out.device.type == "cuda" and out.cpu().tolist() == [3.0, 3.0, 3.0]


def test_another_device_index_is_refused_not_redirected():
    """flow runs on the current device: asking for another index raises (torch's "invalid device
    ordinal" where there is no such device) instead of placing the tensor on the current one."""
    here = flow.cuda.current_device()
    other = flow.cuda.device_count()  # no such device
    x = flow.ones(3)
    for place in (lambda: x.to(f"cuda:{other}"), lambda: x.cuda(other), lambda: x.to(flow.device("cuda", other)),
                  lambda: flow.zeros(3, device=f"cuda:{other}"), lambda: flow.ones(3).cuda().cuda(other)):
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            place()
    for place in (lambda: x.to(f"cuda:{here}"), lambda: x.cuda(here), lambda: flow.zeros(3, device="cuda"),
                  lambda: x.to(flow.ones(1).cuda())):
        assert place().device.type == "cuda"


# ---- library calls: cuDNN convolutions, cuBLASLt matrix products -----------------------------------

# float32 library calls are strict FP32 in flow (no TF32), as torch's matmul default; torch's cuDNN
# default allows TF32, so the oracle turns it off.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
LIB_TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (5e-3, 5e-3), torch.bfloat16: (3e-2, 3e-2)}


def check_lib(got, want, dtype):
    g = to_torch(got).float()
    w = want.detach().float().cpu()
    rtol, atol = LIB_TOL[dtype]
    torch.testing.assert_close(g, w, rtol=rtol, atol=atol * max(1.0, float(w.abs().max())), equal_nan=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kw", [
    ((2, 8, 17, 13), dict(out=16, k=3, stride=1, padding=1)),
    ((1, 3, 32, 32), dict(out=8, k=7, stride=2, padding=3)),
    ((4, 16, 9, 9), dict(out=16, k=3, stride=1, padding=2, dilation=2, groups=4)),
    ((2, 32, 8, 8), dict(out=64, k=1, stride=2, padding=0)),
])
def test_conv2d_cudnn(dtype, shape, kw):
    x = torch.randn(*shape, device=TDEV, dtype=dtype)
    w = torch.randn(kw["out"], shape[1] // kw.get("groups", 1), kw["k"], kw["k"], device=TDEV, dtype=dtype) * 0.2
    b = torch.randn(kw["out"], device=TDEV, dtype=dtype)
    args = dict(stride=kw["stride"], padding=kw["padding"], dilation=kw.get("dilation", 1), groups=kw.get("groups", 1))
    want = torch.nn.functional.conv2d(x, w, b, **args)
    check_lib(flow.nn.functional.conv2d(to_flow_cuda(x), to_flow_cuda(w), to_flow_cuda(b), **args), want, dtype)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_conv2d_asymmetric_padding_pads_a_copy(dtype, jit):
    """cuDNN pads both sides of a dim alike. padding='same' with an even reach (it was a
    NotImplementedError on CUDA) keeps the smaller side for cuDNN and writes the rest around one
    copy of the input, as torch's CUDA convolution does; jitted in half precision the two
    convolutions run NHWC (the layout pass), so the copy is padded in NHWC order."""
    x = torch.randn(2, 8, 9, 10, device=TDEV, dtype=dtype)
    w1 = torch.randn(16, 8, 4, 2, device=TDEV, dtype=dtype) * 0.2  # reach (3, 1): one more row below
    b1 = torch.randn(16, device=TDEV, dtype=dtype)
    w2 = torch.randn(8, 16, 3, 2, device=TDEV, dtype=dtype) * 0.2  # dilation (1, 3): reach (2, 3)

    def f(m):
        def g(x, w1, b1, w2):
            h = m.relu(m.nn.functional.conv2d(x, w1, b1, padding="same"))
            return m.nn.functional.conv2d(h, w2, padding="same", dilation=(1, 3))
        return g

    run = flow.jit(f(flow)) if jit else f(flow)
    got = run(*[to_flow_cuda(t) for t in (x, w1, b1, w2)])
    assert tuple(got.shape) == (2, 8, 9, 10)
    check_lib(got, f(torch)(x, w1, b1, w2), dtype)
    if jit and dtype != torch.float32:
        assert run.executable.num_channels_last == 2, run.explain(False)
    # An input in memory order N, W, C, H: its padded copy keeps that order (eager pad keeps an
    # input's memory order), which is not NHWC-dense, and must be repacked, not misread.
    base = torch.randn(2, 10, 8, 9, device=TDEV, dtype=dtype)
    fodd = to_flow_cuda(base).permute(0, 2, 3, 1)
    assert tuple(fodd.stride()) == (720, 9, 1, 72)
    check_lib(run(fodd, *[to_flow_cuda(t) for t in (w1, b1, w2)]), f(torch)(base.permute(0, 2, 3, 1), w1, b1, w2),
              dtype)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_convolutions_of_a_large_batch_run_in_chunks(jit, monkeypatch):
    """A batch whose tensors exceed cuDNN's 2^31-1 elements per tensor runs in chunks of images, as
    torch's does (it was a NotImplementedError); FLOW_CUDNN_MAX_TENSOR_ELEMENTS lowers the limit
    here so that 5 images go as 2 + 2 + 1, for a convolution and a transposed one (backward data,
    whose input and output images differ in shape)."""
    monkeypatch.setenv("FLOW_CUDNN_MAX_TENSOR_ELEMENTS", str(2 * 16 * 6 * 6))
    x = torch.randn(5, 8, 6, 6, device=TDEV)
    w = torch.randn(16, 8, 3, 3, device=TDEV) * 0.2
    wt = torch.randn(16, 3, 2, 2, device=TDEV) * 0.2  # images of 16 x 6 x 6 in, 3 x 12 x 12 out
    bt = torch.randn(3, device=TDEV)

    def f(m):
        def g(x, w, wt, bt):
            h = m.relu(m.nn.functional.conv2d(x, w, padding=1))
            return m.nn.functional.conv_transpose2d(h, wt, bt, stride=2)
        return g

    run = flow.jit(f(flow)) if jit else f(flow)
    count = lambda c: c["cudnn_fused"] + c["cudnn_unfused"]  # noqa: E731
    before = count(flow.cuda.library_counters())
    got = run(*[to_flow_cuda(t) for t in (x, w, wt, bt)])
    assert count(flow.cuda.library_counters()) - before == 6  # 3 chunks per convolution
    check_lib(got, f(torch)(x, w, wt, bt), torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", [((33, 17), (17, 9)), ((4, 33, 17), (17, 9)), ((3, 1, 5, 8), (2, 8, 6)),
                                   ((17,), (17, 9)), ((4, 33, 17), (17,)), ((5, 64, 64), (5, 64, 64))])
def test_matmul_cublaslt(dtype, sa, sb):
    a = torch.randn(*sa, device=TDEV, dtype=dtype)
    b = torch.randn(*sb, device=TDEV, dtype=dtype)
    check_lib(flow.matmul(to_flow_cuda(a), to_flow_cuda(b)), torch.matmul(a, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_transposed_and_linear(dtype):
    a = torch.randn(40, 24, device=TDEV, dtype=dtype)
    b = torch.randn(56, 24, device=TDEV, dtype=dtype)
    bias = torch.randn(56, device=TDEV, dtype=dtype)
    fa, fb = to_flow_cuda(a), to_flow_cuda(b)
    check_lib(flow.matmul(fa, fb.t()), a @ b.t(), dtype)
    check_lib(flow.matmul(fa.t(), to_flow_cuda(a)), a.t() @ a, dtype)
    check_lib(flow.nn.functional.linear(fa, fb, to_flow_cuda(bias)), torch.nn.functional.linear(a, b, bias), dtype)
    x3 = torch.randn(3, 7, 24, device=TDEV, dtype=dtype)
    check_lib(flow.nn.functional.linear(to_flow_cuda(x3), fb), torch.nn.functional.linear(x3, b), dtype)


CONV_T_CASES = [  # (input, channels out, groups, kernel, stride, padding, output_padding, dilation)
    ((2, 8, 5, 6), 6, 2, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
    ((1, 3, 4, 4), 2, 1, (2, 3), (2, 1), (0, 1), (1, 0), (1, 2)),
    ((2, 4, 3, 3), 4, 4, (1, 1), (3, 3), (0, 0), (2, 2), (1, 1)),  # depthwise
    ((1, 2, 5, 5), 3, 1, (3, 3), (1, 1), (2, 2), (0, 0), (1, 1)),
    ((3, 5, 6), 2, 1, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1)),  # unbatched
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv_transpose2d_is_cudnn_backward_data(dtype):
    """conv_transpose2d on CUDA is one cuDNN backward-data call (runtime/cudnn.h, transposed), eager
    and under jit with its bias, a residual and relu as the epilogue; an output_padding at or above
    the stride (allowed by torch below the dilation) still runs, as a convolution."""
    g = torch.Generator().manual_seed(7)
    for shape, cout, groups, k, s, p, op, d in CONV_T_CASES:
        cin = shape[-3]
        x = torch.randn(*shape, generator=g).to(TDEV, dtype)
        w = (torch.randn(cin, cout // groups, *k, generator=g) * 0.3).to(TDEV, dtype)
        b = torch.randn(cout, generator=g).to(TDEV, dtype)
        args = (s, p, op, groups, d)
        want = torch.nn.functional.conv_transpose2d(x, w, b, *args)
        before = flow.cuda.library_counters()["cudnn_unfused"]
        check_lib(flow.nn.functional.conv_transpose2d(to_flow_cuda(x), to_flow_cuda(w), to_flow_cuda(b), *args),
                  want, dtype)
        assert flow.cuda.library_counters()["cudnn_unfused"] == before + 1, f"{shape} {args}: not one cuDNN call"

        def block(m):
            return lambda x, w, b, r: m.relu(m.nn.functional.conv_transpose2d(x, w, b, *args) + r)

        r = torch.randn(*want.shape, generator=g).to(TDEV, dtype)
        jf = flow.jit(block(flow))
        check_lib(jf(*[to_flow_cuda(t) for t in (x, w, b, r)]), block(torch)(x, w, b, r), dtype)
        assert jf.num_kernels == 0, jf.explain(False)  # bias, residual and relu in the library step
        assert "cuDNN" in jf.explain(False)
    x = torch.randn(2, 4, 6, 6, generator=g).to(TDEV, dtype)
    w = (torch.randn(4, 3, 3, 3, generator=g) * 0.3).to(TDEV, dtype)
    want = torch.nn.functional.conv_transpose2d(x, w, None, 1, 1, 1, 1, 2)  # output_padding 1 >= stride 1
    check_lib(flow.nn.functional.conv_transpose2d(to_flow_cuda(x), to_flow_cuda(w), None, 1, 1, 1, 1, 2), want, dtype)
    for search in ("heuristic", "exhaustive"):
        f = flow.jit(lambda x, w: flow.nn.functional.conv_transpose2d(x, w, None, 2, 1, 1), conv_search=search)
        check_lib(f(to_flow_cuda(x), to_flow_cuda(w)), torch.nn.functional.conv_transpose2d(x, w, None, 2, 1, 1),
                  dtype)


def test_conv_transpose2d_stays_nhwc_between_half_convolutions():
    """Under float16 autocast a decoder's upsampling runs NHWC like the convolutions around it (the
    layout pass, scheduler/channels_last.h): no transposes between them."""
    g = torch.Generator().manual_seed(3)
    ws = [(torch.randn(*s, generator=g) * 0.2).to(TDEV) for s in ((16, 8, 3, 3), (16, 8, 2, 2), (4, 8, 3, 3))]

    def decoder(m):
        def f(x, w1, wt, w2):
            h = m.relu(m.nn.functional.conv2d(x, w1, padding=1))
            h = m.relu(m.nn.functional.conv_transpose2d(h, wt, stride=2))
            return m.nn.functional.conv2d(h, w2, padding=1)
        return f

    x = torch.randn(2, 8, 8, 8, generator=g).to(TDEV)
    jf = flow.jit(decoder(flow), amp="float16")
    got = jf(to_flow_cuda(x), *[to_flow_cuda(w) for w in ws])
    exact, want = decoder(torch)(x, *ws), None
    with torch.autocast(TDEV, dtype=torch.float16) if TDEV == "cuda" else torch.autocast("cpu", torch.bfloat16):
        want = decoder(torch)(x, *ws)
    assert got.dtype.name == "float16"
    assert _rel(got, exact) < 3 * _rel(flow.tensor(want.float().cpu().numpy()), exact) + 5e-3
    assert jf.executable.num_channels_last == 3, jf.explain(False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_jit_conv_epilogue_is_fused_into_cudnn(dtype):
    def block(m):
        def f(x, w, b, r):
            return m.relu(m.nn.functional.conv2d(x, w, b, padding=1) + r)
        return f

    x = torch.randn(2, 16, 12, 12, device=TDEV, dtype=dtype)
    w = torch.randn(16, 16, 3, 3, device=TDEV, dtype=dtype) * 0.1
    b = torch.randn(16, device=TDEV, dtype=dtype)
    r = torch.randn(2, 16, 12, 12, device=TDEV, dtype=dtype)
    jf = flow.jit(block(flow))
    before = flow.cuda.library_counters()
    got = jf(*[to_flow_cuda(t) for t in (x, w, b, r)])
    check_lib(got, block(torch)(x, w, b, r), dtype)
    assert jf.num_kernels == 0, jf.explain(False)  # bias, residual and relu all in the cuDNN call
    assert "cuDNN" in jf.explain(False)
    # One convolution ran, through the fused call or (cuDNN refusing it) the epilogue kernel.
    after = flow.cuda.library_counters()
    ran = {k: after[k] - before[k] for k in ("cudnn_fused", "cudnn_unfused")}
    assert sum(ran.values()) == 1, (ran, after["cudnn_last_refusal"])
    # The emulated cuDNN accepts every fused call it is documented to: a refusal there means flow's
    # fused descriptors are wrong (on a device the fallback would hide it).
    if EMULATED:
        assert ran["cudnn_fused"] == 1, (ran, after["cudnn_last_refusal"])
    print(f"{dtype}: {ran}; last refusal: {after['cudnn_last_refusal'] or 'none'}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_jit_linear_bias_gelu_tanh_is_one_cublaslt_call(dtype):
    def mlp(m):
        return lambda x, w, b: m.nn.functional.gelu(m.nn.functional.linear(x, w, b), approximate="tanh")

    x = torch.randn(64, 128, device=TDEV, dtype=dtype)
    w = torch.randn(256, 128, device=TDEV, dtype=dtype) * 0.1
    b = torch.randn(256, device=TDEV, dtype=dtype)
    jf = flow.jit(mlp(flow))
    check_lib(jf(*[to_flow_cuda(t) for t in (x, w, b)]), mlp(torch)(x, w, b), dtype)
    assert jf.num_kernels == 0, jf.explain(False)
    assert "cuBLASLt" in jf.explain(False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cublaslt_plans_are_made_once_per_problem(dtype):
    """A repeated cuBLASLt product reuses its plan (descriptors and algorithm, runtime/cublaslt.h):
    one plan for the first call of a problem, none for later calls, even with new operands and a
    new bias (its pointer is the one per-call attribute); a new shape makes a new one."""
    def mlp(m):
        return lambda x, w, b: m.nn.functional.relu(m.nn.functional.linear(x, w, b))

    jf = flow.jit(mlp(flow))
    plans = lambda: flow.cuda.library_counters()["cublaslt_plans"]  # noqa: E731
    results, alive = [], []
    for rows in (24, 24, 24, 40):
        x = torch.randn(rows, 48, device=TDEV, dtype=dtype)
        w = torch.randn(72, 48, device=TDEV, dtype=dtype) * 0.1
        b = torch.randn(72, device=TDEV, dtype=dtype)
        args = [to_flow_cuda(t) for t in (x, w, b)]
        alive.append(args)  # so that each call's bias lies at a new address
        before = plans()
        check_lib(jf(*args), mlp(torch)(x, w, b), dtype)
        results.append(plans() - before)
    assert len({a[2].data_ptr() for a in alive}) == len(alive)
    assert jf.num_kernels == 0, jf.explain(False)
    # The first call may reuse a plan of an earlier test with the same problem: at most one.
    assert results[0] <= 1 and results[1:3] == [0, 0] and results[3] == 1, results


def test_conv_search_exhaustive_matches_heuristic():
    x = torch.randn(4, 32, 28, 28, device=TDEV, dtype=torch.float16)
    w = torch.randn(64, 32, 3, 3, device=TDEV, dtype=torch.float16) * 0.1

    def f(m):
        return lambda x, w: m.relu(m.nn.functional.conv2d(x, w, padding=1))

    want = f(torch)(x, w)
    for search in ("heuristic", "exhaustive"):
        check_lib(flow.jit(f(flow), conv_search=search)(to_flow_cuda(x), to_flow_cuda(w)), want, torch.float16)


# ---- whole models: float32 and autocast, CUDA graphs ------------------------------------------------

def _twins(name, factory, **kw):
    import sys as _sys
    _sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from models import loader
    tmod, fmod = loader.load(name, "torch"), loader.load(name, "flow")
    torch.manual_seed(0)
    tm, fm = getattr(tmod, factory)(**kw), getattr(fmod, factory)(**kw)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in tm.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1, generator=g)
                mod.running_var.uniform_(0.5, 1.5, generator=g)
                mod.weight.uniform_(0.5, 1.5, generator=g)
    tm.eval()
    fm.load_state_dict(tm.state_dict())
    fm.eval()
    return tm.to(TDEV), fm.cuda()


def _rel(got, want):
    g, w = to_torch(got).double(), want.detach().double().cpu()
    return float((g - w).abs().max() / w.abs().max())


def _torch_outputs(tm, x, amp):
    """torch's float32 output and its output under autocast to `amp` (the float32 one without)."""
    with torch.no_grad():
        exact = tm(x)
        if amp is None:
            return exact, exact
        with torch.autocast(TDEV, dtype=getattr(torch, amp)):
            return exact, tm(x)


def _as_close_as_torch_autocast(got, want, exact):
    """As close to the float32 result as torch's own autocast result is (with a margin)."""
    return _rel(got, exact) < 3 * _rel(flow.tensor(want.float().cpu().numpy()), exact) + 2e-3


def _check_convnet_on_gpu(tm, fm, x, amp):
    """float32: flow jit and eager match torch; autocast: the half output is as close to float32 as
    torch's autocast output, and the half convolutions ran NHWC."""
    exact, want = _torch_outputs(tm, x, amp)
    jm = flow.jit(fm, amp=amp)
    got = jm(to_flow_cuda(x))
    if amp is None:
        assert _rel(got, want) < 1e-4
        assert _rel(fm(to_flow_cuda(x)), want) < 1e-4  # eager
    else:
        assert got.dtype.name == amp
        assert _as_close_as_torch_autocast(got, want, exact)
        assert jm._jit.executable.num_channels_last > 0


@pytest.mark.parametrize("amp", [None, "float16", "bfloat16"])
def test_resnet50_on_gpu(amp):
    tm, fm = _twins("resnet", "resnet50")
    _check_convnet_on_gpu(tm, fm, torch.randn(2, 3, 64, 64, device=TDEV), amp)


@pytest.mark.parametrize("amp", [None, "float16"])
def test_densenet_on_gpu(amp):
    """DenseNet's concatenations along channels (NHWC under float16), average-pool transitions
    (as_strided windows of NHWC values) and 1x1 convolutions reading concatenations."""
    tm, fm = _twins("densenet", "DenseNet", growth_rate=8, block_config=(3, 3), num_init_features=16,
                    num_classes=10)
    _check_convnet_on_gpu(tm, fm, torch.randn(2, 3, 32, 32, device=TDEV), amp)


@pytest.mark.parametrize("amp", [None, "float16"])
def test_unet_on_gpu(amp):
    """A U-Net: a transposed convolution (cuDNN's backward data) between NHWC half convolutions under
    float16, group norm, nearest and bilinear upsampling, an SPPF block's chained max pools."""
    tm, fm = _twins("unet", "unet")
    _check_convnet_on_gpu(tm, fm, torch.randn(1, 3, 32, 32, device=TDEV), amp)


@pytest.mark.parametrize("amp", [None, "float16"])
def test_vit_encoder_on_gpu(amp):
    # Two of ViT-B/16's twelve layers on the emulated device (the same layer, a sixth of the time).
    tm, fm = _twins("vit", "vit_b_16", num_layers=2 if EMULATED else 12)
    x = torch.randn(1, 3, 224, 224, device=TDEV)
    exact, want = _torch_outputs(tm, x, amp)
    got = flow.jit(fm, amp=amp)(to_flow_cuda(x))
    if amp is None:
        assert _rel(got, want) < 1e-4
    else:
        assert got.dtype == flow.float32 or got.dtype.name == amp
        assert _as_close_as_torch_autocast(got, want, exact)


def test_cuda_graph_replay_matches_normal_runs():
    tm, fm = _twins("resnet", "resnet50")
    plain = flow.jit(fm, amp="float16")
    graphed = flow.jit(fm, amp="float16", cuda_graphs=True)
    outs = []
    for i in range(4):
        side = 32 if EMULATED else 64  # a quarter of the host time on the emulated device
        x = to_flow_cuda(torch.randn(2, 3, side, side, device=TDEV))
        a, b = plain(x), graphed(x)
        torch.testing.assert_close(to_torch(b).float(), to_torch(a).float(), rtol=0, atol=0)
        outs.append((b, to_torch(b).clone()))
    exe = graphed._jit.executable
    assert exe.num_graph_replays == 2, exe.num_graph_replays
    # An output returned earlier is not overwritten by later replays.
    torch.testing.assert_close(to_torch(outs[2][0]), outs[2][1], rtol=0, atol=0)
