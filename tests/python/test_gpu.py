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

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80]),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
FLOW_OF = {torch.float32: flow.float32, torch.float16: flow.float16, torch.bfloat16: flow.bfloat16}
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


def to_flow_cuda(t: torch.Tensor) -> "flow.Tensor":
    """A flow CUDA tensor with t's values (through the host: flow and torch keep separate memory)."""
    # Conversions run on the device: the GPU build has no CPU code generator.
    c = t.detach().cpu()
    if c.dtype == torch.bfloat16:
        return flow.tensor(c.float().numpy()).cuda().to(flow.bfloat16)
    return flow.tensor(c.numpy()).cuda()


def to_torch(f: "flow.Tensor") -> torch.Tensor:
    if f.dtype is flow.bfloat16:
        return torch.from_numpy(f.float().cpu().numpy()).to(torch.bfloat16)
    return torch.from_numpy(f.cpu().numpy())


def check(got: "flow.Tensor", want: torch.Tensor, dtype=torch.float32):
    assert got.device.type == "cuda"
    g = to_torch(got)
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    rtol, atol = TOL.get(dtype, (2e-5, 2e-5))
    torch.testing.assert_close(g.float(), want.detach().cpu().float(), rtol=rtol, atol=atol, equal_nan=True)


UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("n", [1, 7, 1031, (1 << 20) + 3])
def test_unary(op, dtype, n):
    x = torch.randn(n, device="cuda", dtype=dtype)
    if op in ("log", "sqrt", "rsqrt"):
        x = x.abs() + 0.1
    check(getattr(flow, op)(to_flow_cuda(x)), getattr(torch, op)(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_binary_broadcast(op, dtype):
    a = torch.randn(33, 1, 65, device="cuda", dtype=dtype)
    b = torch.randn(7, 65, device="cuda", dtype=dtype)
    check(getattr(flow, op)(to_flow_cuda(a), to_flow_cuda(b)), getattr(torch, op)(a, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_both_forms(dtype):
    x = torch.randn(4099, device="cuda", dtype=dtype)
    fx = to_flow_cuda(x)
    check(flow.nn.functional.gelu(fx), torch.nn.functional.gelu(x), dtype)
    check(flow.nn.functional.gelu(fx, approximate="tanh"), torch.nn.functional.gelu(x, approximate="tanh"), dtype)


def test_non_contiguous_inputs():
    x = torch.randn(65, 129, device="cuda")
    fx = to_flow_cuda(x)
    check(flow.exp(fx.t()), torch.exp(x.t()))          # transposed view
    check(flow.relu(fx[:, 1::2]), torch.relu(x[:, 1::2]))  # strided slice


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((1, 1), -1), ((7, 33), -1), ((64, 4096), -1), ((33, 65), 0), ((5, 6, 7), 1)])
def test_reductions_and_softmax(shape, dim, dtype):
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    fx = to_flow_cuda(x)
    check(flow.sum(fx, dim=dim), torch.sum(x, dim=dim), dtype)
    check(flow.mean(fx, dim=dim, keepdim=True), torch.mean(x, dim=dim, keepdim=True), dtype)
    check(flow.amax(fx, dim=dim), torch.amax(x, dim=dim), dtype)
    check(flow.softmax(fx, dim=dim), torch.softmax(x, dim=dim), dtype)
    check(flow.log_softmax(fx, dim=dim), torch.log_softmax(x, dim=dim), dtype)


def test_jit_chain_softmax_layernorm_on_gpu():
    def chain(m):
        return lambda x, a, b: m.relu(x * a + b) * m.sigmoid(x) + 1.0

    def rownorm(m):
        def f(x, w, b):
            mu = x.mean(-1, keepdim=True)
            d = x - mu
            return d * m.rsqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b
        return f

    xs = [torch.randn(1 << 20, device="cuda") for _ in range(3)]
    f = flow.jit(chain(flow))
    out = f(*[to_flow_cuda(t) for t in xs])
    check(out, chain(torch)(*xs))
    assert f.num_kernels == 1
    assert "__global__" in f.explain()

    x = torch.randn(256, 4096, device="cuda")
    w = torch.randn(4096, device="cuda")
    b = torch.randn(4096, device="cuda")
    g = flow.jit(rownorm(flow))
    check(g(to_flow_cuda(x), to_flow_cuda(w), to_flow_cuda(b)), rownorm(torch)(x, w, b))
    assert g.num_kernels == 1


def test_mixed_devices_raise():
    with pytest.raises(RuntimeError, match="same device"):
        flow.add(flow.ones(3).cuda(), flow.ones(3))
