"""The small integer dtypes uint8, int8 and int16 (dsl/types.h): storage types that compute in
int32 and wrap when each op's result is rounded back, as torch's kernels do. Image pipelines feed
uint8, so the first test is one. The per-op suites (test_ops, test_tensor, test_sort, ...) run
these dtypes too through conftest.ALL_DTYPES; this file covers what is particular to them: the
wrap of results and of Python numbers, casts from out-of-range floats, promotion, numpy and
checkpoint interchange, byte masks, under @flow.jit and on the device."""
import io

import numpy as np
import pytest
import torch
import torch.nn as tnn

import flow
import flow.nn as fnn
from conftest import ALL_DTYPES, FLOW_OF, SMALL_INT_DTYPES, assert_same, make, raises_like, to_flow, to_torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]


def full_range(dtype, shape, gen):
    """Every value of the dtype is possible (uint8 0..255, int8 -128..127, int16 -32768..32767)."""
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max + 1, shape, generator=gen, dtype=torch.int64).to(dtype)


def test_dtype_objects():
    assert repr(flow.uint8) == "flow.uint8" and flow.short is flow.int16
    assert [d.itemsize for d in (flow.uint8, flow.int8, flow.int16)] == [1, 1, 2]
    assert not flow.uint8.is_signed and flow.int8.is_signed and flow.int16.is_signed
    assert not flow.uint8.is_floating_point
    x = flow.zeros(3, dtype=flow.int32)
    assert x.byte().dtype is flow.uint8 and x.char().dtype is flow.int8 and x.short().dtype is flow.int16
    assert x.byte().type() == "flow.ByteTensor" and x.char().element_size() == 1


@pytest.mark.parametrize("device", DEVICES)
def test_image_pipeline_under_jit(device, gen):
    """A uint8 HWC image batch -> NCHW float in [0, 1] -> normalized -> a conv net, as a classifier's
    preprocessing does it, compiled as one function."""
    torch.manual_seed(gen.initial_seed() % 2**31)
    net = tnn.Sequential(tnn.Conv2d(3, 8, 3, padding=1), tnn.ReLU(), tnn.AdaptiveAvgPool2d(1), tnn.Flatten(),
                         tnn.Linear(8, 5)).eval()
    fnet = fnn.Sequential(fnn.Conv2d(3, 8, 3, padding=1), fnn.ReLU(), fnn.AdaptiveAvgPool2d(1), fnn.Flatten(),
                          fnn.Linear(8, 5))
    fnet.load_state_dict({k: to_flow(v) for k, v in net.state_dict().items()})
    fnet = fnet.to(device).eval()
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    fmean, fstd = to_flow(mean).to(device), to_flow(std).to(device)

    def torch_pre(img):
        return net((img.permute(0, 3, 1, 2).float() / 255 - mean) / std)

    @flow.jit
    def flow_pre(img):
        return fnet((img.permute(0, 3, 1, 2).float() / 255 - fmean) / fstd)

    for _ in range(2):  # the second call runs the cached kernels on new data
        img = full_range(torch.uint8, (2, 11, 13, 3), gen)
        fimg = flow.from_numpy(img.numpy()).to(device)
        assert fimg.dtype is flow.uint8
        with torch.no_grad():
            want = torch_pre(img)
        assert_same(flow_pre(fimg).cpu(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_results_wrap(dtype, jit, gen):
    """Sums, products, negation and shifts wrap to the dtype, fused chains included (each op
    rounds back, so (a * b) // 3 divides the wrapped product, as torch does)."""
    a, b = full_range(dtype, (257,), gen), full_range(dtype, (257,), gen)
    c = make((257,), dtype, gen, low=1, high=5)

    def f(x, y, z):
        return [x + y, x - y, x * y, -x, (x * y) // z, (x + y) % z, x * 3 + 7, abs(x), x << 3, (x * y) >> 1,
                ~x, (x + y).max(), x.cumsum(0), x.sum(), (x * y).amin()]

    ff = flow.jit(f) if jit else f
    got = ff(to_flow(a), to_flow(b), to_flow(c))
    for k, (g, w) in enumerate(zip(got, f(a, b, c))):
        assert_same(g, w, msg=f"expression {k}")


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_python_numbers_wrap_to_the_dtype(dtype, device, gen):
    """torch converts a Python int to a small integer tensor's dtype: uint8 x < 300 compares with
    44, x // 300 divides by 44; true division and float numbers promote instead."""
    x = full_range(dtype, (64,), gen)
    fx = to_flow(x).to(device)
    cases = {
        "add": lambda t: t + 300, "lt": lambda t: t < 300, "ge": lambda t: t >= -200, "eq": lambda t: t == 300,
        "floordiv": lambda t: t // 300, "mod": lambda t: t % 301, "mul": lambda t: t * 1000,
        "max": lambda t: t.clamp(max=100), "truediv": lambda t: t / 300, "float": lambda t: t * 0.5,
        "rsub": lambda t: 1000 - t, "bitand": lambda t: t & 0x1F0, "pow": lambda t: t ** 2,
        "zero_dim": lambda t: t + (torch.tensor(70000) if isinstance(t, torch.Tensor) else flow.tensor(70000)),
    }
    for name, fn in cases.items():
        if raises_like(lambda: fn(x), lambda: fn(fx)):
            continue
        assert_same(fn(fx).cpu(), fn(x), msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_casts_from_floats_out_of_range(device):
    """float -> small int truncates through int32 and wraps (torch's CPU results on x86: -1.0 -> 255,
    300.0 -> 44, NaN and 1e10 -> 0); in-range values are exact."""
    vals = torch.tensor([0.0, 0.9, -0.9, 1.5, 127.9, 128.0, 255.0, 255.9, -1.0, -128.5, 300.0, 1e5, -40000.0,
                         1e10, -1e10, float("nan"), float("inf"), -float("inf")])
    for dtype in SMALL_INT_DTYPES:
        for src in (torch.float32, torch.float64, torch.float16):
            v = vals.to(src)
            if src == torch.float16:
                v = v[v.abs() < 65504]
            assert_same(to_flow(v).to(device).to(FLOW_OF[dtype]).cpu(), v.to(dtype), msg=f"{src} -> {dtype}")


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
def test_casts_between_integer_types(dtype, gen):
    """Narrowing wraps, widening sign- or zero-extends, as torch's casts."""
    wide = torch.randint(-2**40, 2**40, (300,), generator=gen)
    assert_same(to_flow(wide).to(FLOW_OF[dtype]), wide.to(dtype))
    x = full_range(dtype, (300,), gen)
    for other in ALL_DTYPES:
        assert_same(to_flow(x).to(FLOW_OF[other]), x.to(other), msg=f"{dtype} -> {other}")


def test_promotion_matches_torch():
    dts = ALL_DTYPES
    for a in dts:
        for b in dts:
            assert flow.promote_types(FLOW_OF[a], FLOW_OF[b]) is FLOW_OF[torch.promote_types(a, b)], (a, b)


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
def test_mixed_small_int_operands(dtype, gen):
    """uint8 with int8 computes in int16; a wider operand's values wrap into the common dtype."""
    x = full_range(dtype, (5, 7), gen)
    for other in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.bool, torch.float16):
        y = full_range(other, (7,), gen) if other not in (torch.bool, torch.float16) else make((7,), other, gen)
        for name, fn in {"add": torch.add, "mul": torch.mul, "lt": torch.lt, "max": torch.maximum,
                         "where": lambda p, q: torch.where(p > 0, p, q)}.items():
            ffn = getattr(flow, name if name != "max" else "maximum") if name != "where" else \
                (lambda p, q: flow.where(p > 0, p, q))
            if raises_like(lambda: fn(x, y), lambda: ffn(to_flow(x), to_flow(y))):
                continue
            assert_same(ffn(to_flow(x), to_flow(y)), fn(x, y), msg=f"{name} {dtype} {other}")


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
def test_reductions_promote_like_torch(dtype, gen):
    """sum/prod/cumsum give int64; max/min/argmax keep the dtype; mean refuses, as torch."""
    x = full_range(dtype, (6, 50), gen)
    fx = to_flow(x)
    for name in ("sum", "prod", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "mean", "std", "median"):
        tf, ff = getattr(torch, name), getattr(flow, name)
        if raises_like(lambda: tf(x, 1), lambda: ff(fx, 1)):
            continue
        want, got = tf(x, 1), ff(fx, 1)
        if isinstance(want, tuple):  # median: (values, indices)
            want, got = want[0], got[0]
        assert_same(got, want, msg=name)
    assert_same(fx.sum(dtype=flow.uint8), x.sum(dtype=torch.uint8))
    assert_same(fx.max(), x.max())


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
def test_numpy_interchange_is_exact(dtype, gen):
    x = full_range(dtype, (4, 9), gen).numpy()
    for f in (flow.from_numpy(x), flow.tensor(x), flow.as_tensor(x)):
        assert f.dtype is FLOW_OF[torch.from_numpy(x).dtype]
        assert f.numpy().dtype == x.dtype and np.array_equal(f.numpy(), x)
    assert flow.tensor([1, 2], dtype=flow.uint8).tolist() == [1, 2]
    assert np.array_equal(flow.tensor(x).t().numpy(), x.T)


def test_creation_refuses_values_that_overflow():
    """torch.full(300, uint8) and torch.tensor([300], dtype=uint8) raise: the value does not fit."""
    for torch_fn, flow_fn in [(lambda: torch.full((2,), 300, dtype=torch.uint8),
                               lambda: flow.full((2,), 300, dtype=flow.uint8)),
                              (lambda: torch.tensor([300], dtype=torch.uint8),
                               lambda: flow.tensor([300], dtype=flow.uint8)),
                              (lambda: torch.full((2,), -129, dtype=torch.int8),
                               lambda: flow.full((2,), -129, dtype=flow.int8)),
                              (lambda: torch.tensor([2**31], dtype=torch.int32),
                               lambda: flow.tensor([2**31], dtype=flow.int32)),
                              (lambda: torch.full((1,), -0.5, dtype=torch.uint8),
                               lambda: flow.full((1,), -0.5, dtype=flow.uint8))]:
        assert raises_like(torch_fn, flow_fn)
    # what torch accepts: an unsigned type takes negatives down to -max (wrapped), floats truncate
    for v, dt in [(-255, torch.uint8), (255.99, torch.uint8), (-0.99, torch.int8), (-128, torch.int8)]:
        assert_same(flow.tensor([v], dtype=FLOW_OF[dt]), torch.tensor([v], dtype=dt), msg=str(v))
        assert_same(flow.full((2,), v, dtype=FLOW_OF[dt]), torch.full((2,), v, dtype=dt), msg=str(v))
    assert_same(flow.full((2,), 255, dtype=flow.uint8), torch.full((2,), 255, dtype=torch.uint8))
    assert_same(flow.arange(250, 256, dtype=flow.uint8), torch.arange(250, 256, dtype=torch.uint8))


def test_byte_index_is_a_mask(gen):
    """torch's legacy rule: indexing with a uint8 tensor selects where it is nonzero (with a
    deprecation warning)."""
    x = make((6, 4), torch.float32, gen)
    m = torch.tensor([1, 0, 3, 0, 0, 1], dtype=torch.uint8)
    with pytest.warns(UserWarning, match="uint8 is now deprecated"):
        got = to_flow(x)[to_flow(m)]
    assert_same(got, x[m.bool()])


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
def test_checkpoints_and_safetensors_round_trip(dtype, gen, tmp_path):
    x = full_range(dtype, (3, 5), gen)
    buf = io.BytesIO()
    torch.save({"x": x, "view": x[:, 1::2]}, buf)
    buf.seek(0)
    got = flow.load(buf)
    assert_same(got["x"], x)
    assert_same(got["view"], x[:, 1::2])
    out = io.BytesIO()
    flow.save({"y": got["x"]}, out)
    out.seek(0)
    assert torch.equal(torch.load(out, weights_only=True)["y"], x)
    from flow import _safetensors

    _safetensors.save_file({"x": got["x"]}, str(tmp_path / "x.safetensors"))
    tensors, _ = _safetensors.load_file(str(tmp_path / "x.safetensors"))
    assert_same(tensors["x"], x)


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_sort_topk_and_scatter(dtype, device, gen):
    """The library ops sort and scatter int32 (the values are exact there); scatter_add wraps."""
    x = full_range(dtype, (5, 40), gen)
    fx = to_flow(x).to(device)
    assert_same(flow.sort(fx, dim=1, stable=True).values.cpu(), torch.sort(x, dim=1, stable=True).values)
    assert_same(flow.topk(fx, 4, dim=1).values.cpu(), torch.topk(x, 4, dim=1).values)
    ix = torch.randint(0, 3, (5, 40), generator=gen)
    base = full_range(dtype, (5, 3), gen)
    want = base.scatter_add(1, ix, x)
    assert_same(flow.scatter_add(to_flow(base).to(device), 1, to_flow(ix).to(device), fx).cpu(), want)
    assert_same(to_flow(base).to(device).scatter_reduce(1, to_flow(ix).to(device), fx, "amax").cpu(),
                base.scatter_reduce(1, ix, x, "amax"))


@pytest.mark.parametrize("dtype", SMALL_INT_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_views_copies_and_in_place_writes(dtype, device, gen):
    x = full_range(dtype, (6, 8), gen)
    fx = to_flow(x).to(device)
    assert_same(fx.t().contiguous().cpu(), x.t().contiguous())
    assert_same(flow.cat([fx, fx[:2]]).cpu(), torch.cat([x, x[:2]]))
    fx[1:3] += 200
    x[1:3] += 200
    assert_same(fx.cpu(), x)
    fx.masked_fill_(fx > 5, 7)
    x.masked_fill_(x > 5, 7)
    assert_same(fx.cpu(), x)
    assert repr(to_flow(x)).startswith("tensor(") and f"dtype=flow.{FLOW_OF[dtype].name}" in repr(to_flow(x))
