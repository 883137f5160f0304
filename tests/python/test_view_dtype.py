"""Tensor.view(dtype) against torch: eager views alias the storage (shapes, strides, offsets and
bytes as torch's; writes seen both ways), traced views are values (the graph op bitcast, and splits
and joins between element sizes), on random bytes that include NaN payloads and subnormals; torch's
errors; signbit of negative NaNs. GPU-marked copies run on a CUDA device (or the emulated one)."""
import numpy as np
import pytest
import torch

import flow
from conftest import ALL_DTYPES, FLOAT_DTYPES, FLOW_OF, to_flow, to_torch

ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not flow.cuda.is_available(), reason="needs a CUDA device")]
PAIRS = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES]


def _random_source(dtype, shape, gen):
    """A torch tensor of `dtype` holding random bytes (bool: 0 or 1 per byte)."""
    n = int(np.prod(shape)) * dtype.itemsize
    raw = torch.randint(0, 2 if dtype == torch.bool else 256, (n,), generator=gen, dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def _bytes(t):
    """The bytes of a torch tensor's elements in logical order."""
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _same_bits(got, want, what):
    """flow result `got` holds torch result `want`'s bytes (a bool by value: nonzero is true)."""
    assert got.dtype is FLOW_OF[want.dtype], what
    assert tuple(got.shape) == tuple(want.shape), what
    g = to_torch(got.cpu())
    if want.dtype == torch.bool:
        assert torch.equal(g, want.view(torch.uint8) != 0), what
    else:
        assert _bytes(g) == _bytes(want), what


def _source_for(src, dst, shape, gen):
    """Random bytes of `src`; 0 or 1 when read as bool (torch leaves other bytes' bools undefined)."""
    if dst == torch.bool:
        return _random_source(torch.bool, shape, gen).view(src)
    return _random_source(src, shape, gen)


@pytest.mark.parametrize("src,dst", PAIRS, ids=lambda d: str(d).replace("torch.", ""))
def test_eager_view_aliases_as_torch(src, dst, gen):
    t = _source_for(src, dst, (3, 8), gen)
    x = to_flow(t)
    want = t.view(dst)
    got = x.view(FLOW_OF[dst])
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert got._c.offset == want.storage_offset()
    assert got._c.storage_ptr() == x._c.storage_ptr()  # an alias, not a copy
    _same_bits(got, want, f"{src} as {dst}")


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.uint8), (torch.uint8, torch.float32),
                                     (torch.int16, torch.bfloat16), (torch.float64, torch.int32),
                                     (torch.int8, torch.int64)], ids=str)
def test_eager_writes_are_seen_through_the_view_and_back(src, dst, gen):
    t = _random_source(src, (4, 8), gen)
    x = to_flow(t)
    v = x.view(dst)
    tv = t.view(dst)
    fill = _random_source(dst, tuple(tv[1].shape), gen)
    v[1] = to_flow(fill)
    tv[1] = fill
    _same_bits(x, t, "base after a write through the view")
    x[0] = to_flow(_random_source(src, (8,), gen))
    t[0] = to_torch(x[0])
    _same_bits(v, tv, "view after a write to the base")


def test_eager_views_of_views_rescale_offsets_and_strides_as_torch(gen):
    t = _random_source(torch.uint8, (6, 16), gen)
    x = to_flow(t)
    cases = [lambda a: a[2:, 4:12], lambda a: a[2:, 8:16], lambda a: a[::2], lambda a: a[1:5, 8:].t().t(),
             lambda a: a[:, :0]]
    refused = set()
    for case in cases:
        for dst in (torch.int16, torch.float32, torch.float64, torch.int8):
            try:
                want = case(t).view(dst)
            except RuntimeError as e:  # torch's checks, each case once at least (asserted below)
                with pytest.raises(RuntimeError) as got:
                    case(x).view(FLOW_OF[dst])
                assert str(got.value) == str(e)
                refused.add(id(case))
                continue
            got = case(x).view(FLOW_OF[dst])
            assert got.stride() == want.stride() and got._c.offset == want.storage_offset()
            _same_bits(got, want, str(dst))
    assert id(cases[0]) in refused and id(cases[1]) not in refused
    # same-size views keep any strides, transposed or expanded
    w = t.view(torch.float32).t()
    got = x.view(flow.float32).t().view(torch.int32)
    assert got.stride() == w.view(torch.int32).stride()
    _same_bits(got, w.view(torch.int32), "transposed")


@pytest.mark.parametrize("make,dst", [
    (lambda m: m(torch.float32, (3, 4)).t(), torch.uint8),          # last dim not dense
    (lambda m: m(torch.float32, ()), torch.uint8),                  # 0-d, different sizes
    (lambda m: m(torch.uint8, (12,))[:6], torch.float32),           # size not divisible
    (lambda m: m(torch.uint8, (12,))[1:9], torch.float32),          # offset not divisible
    (lambda m: m(torch.uint8, (6, 2))[::3], torch.float32),         # size(-1) 2 < 4
    (lambda m: m(torch.float32, (3, 0)), torch.float64),            # stride(0) of an empty tensor
    (lambda m: m(torch.uint8, (4, 6))[:, :4], torch.float32),       # stride(0) 6 not divisible
    (lambda m: m(torch.float32, (4,))[::2][:1], torch.float64),     # size before the last stride
    (lambda m: m(torch.uint8, (2, 4)).t(), torch.int16),            # the last stride after size and offset
    (lambda m: m(torch.uint8, (16,))[1:].reshape(3, 5)[:, :4], torch.int32),  # offset before the stride
], ids=["stride", "0-d", "size", "offset", "short-row", "empty-stride", "row-stride", "order-size", "order-stride",
        "order-offset"])
def test_view_errors_are_torchs(make, dst, gen):
    t = make(lambda d, s: _random_source(d, s, gen))
    x = make(lambda d, s: to_flow(_random_source(d, s, gen)))
    with pytest.raises(RuntimeError) as want:
        t.view(dst)
    with pytest.raises(RuntimeError) as got:
        x.view(FLOW_OF[dst])
    assert str(got.value) == str(want.value)


def test_view_takes_dtype_by_keyword_and_refuses_mixed_arguments():
    x = flow.zeros(2, 4)
    for py in (float, int, bool):  # Python's types, as torch reads them (float64, int64, bool)
        assert x.view(py).dtype is FLOW_OF[torch.zeros(2, 4).view(py).dtype]
    p = flow.nn.Parameter(flow.zeros(4))
    assert type(p.view(flow.int32)) is flow.Tensor  # a plain tensor, as torch's
    assert x.view(dtype=flow.int32).dtype is flow.int32
    assert x.view(torch.int16).dtype is flow.int16  # torch's dtypes, as everywhere
    with pytest.raises(TypeError):
        x.view(flow.int32, 2)
    with pytest.raises(TypeError):
        x.view(8, dtype=flow.int32)


def _traced_pairs():
    return [(a, b) for a, b in PAIRS if a != b]


@pytest.mark.parametrize("src,dst", _traced_pairs(), ids=lambda d: str(d).replace("torch.", ""))
def test_traced_view_is_the_bytes_as_torch_reads_them(src, dst, gen):
    for shape in [(5, 8), (3, 1, 24)]:
        t = _source_for(src, dst, shape, gen)
        f = flow.jit(lambda a: a.view(FLOW_OF[dst]))
        _same_bits(f(to_flow(t)), t.view(dst), f"{src} as {dst} {shape}")


def _every_pattern(dtype):
    """All 65536 bit patterns of a 2-byte dtype (every NaN payload, subnormal and infinity)."""
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).reshape(256, 256)


@pytest.mark.parametrize("src,dst", [(a, b) for a in (torch.float16, torch.bfloat16, torch.int16)
                                     for b in (torch.float16, torch.bfloat16, torch.int16, torch.uint8) if a != b],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_traced_views_keep_every_half_pattern(src, dst):
    t = _every_pattern(src)
    _same_bits(flow.jit(lambda a: a.view(FLOW_OF[dst]))(to_flow(t)), t.view(dst), f"{src} as {dst}")


def test_traced_views_fuse_with_their_neighbours(gen):
    t = torch.randn(64, 32, generator=gen)
    f = flow.jit(lambda a: ((a * 2).view(flow.int32) & 0x7FFFFFFF).view(flow.float32) + 1)
    flow.reset_launch_count()
    got = f(to_flow(t))
    want = (t * 2).view(torch.int32).bitwise_and(0x7FFFFFFF).view(torch.float32) + 1
    assert torch.equal(to_torch(got), want)
    assert flow.launch_count() == 1
    g = flow.jit(lambda a: (a + 1).view(flow.uint8).view(flow.float32) * 3)  # a split, then a join
    assert torch.equal(to_torch(g(to_flow(t))), ((t + 1).view(torch.uint8).view(torch.float32)) * 3)


def test_traced_views_of_zero_sized_tensors():
    f = flow.jit(lambda a: a.view(flow.uint8))
    assert tuple(f(flow.zeros(0, 4)).shape) == (0, 16)
    with pytest.raises(RuntimeError, match="size\\(-1\\) must be divisible by 4"):
        flow.jit(lambda a: a.view(flow.float32))(flow.zeros(2, 6, dtype=flow.uint8))
    with pytest.raises(RuntimeError, match="dim\\(\\) cannot be 0"):
        flow.jit(lambda a: a.view(flow.uint8))(flow.zeros(()))


def _negative_nans(dtype):
    """torch tensors of `dtype`: -NaN with payloads, NaN, -0.0, 0.0, -inf, -1, subnormal."""
    bits = {torch.float16: [0xFE00, 0xFC01, 0x7E00, 0x8000, 0x0000, 0xFC00, 0xBC00, 0x8001],
            torch.bfloat16: [0xFFC0, 0xFF81, 0x7FC0, 0x8000, 0x0000, 0xFF80, 0xBF80, 0x8001],
            torch.float32: [0xFFC00000, 0xFF800001, 0x7FC00000, 0x80000000, 0, 0xFF800000, 0xBF800000, 0x80000001],
            torch.float64: [0xFFF8 << 48, (0xFFF0 << 48) | 1, 0x7FF8 << 48, 1 << 63, 0, 0xFFF0 << 48,
                            0xBFF0 << 48, (1 << 63) | 1]}[dtype]
    w = dtype.itemsize
    signed = [b - (1 << (8 * w)) if b >= 1 << (8 * w - 1) else b for b in bits]
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[w]
    return torch.tensor(signed, dtype=ints).view(dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_signbit_sees_the_sign_of_nan(dtype):
    t = _negative_nans(dtype)
    want = torch.signbit(t)
    assert want[:2].all()  # the oracle itself: these NaNs are negative
    assert torch.equal(to_torch(flow.signbit(to_flow(t))), want)
    assert torch.equal(to_torch(flow.jit(flow.signbit)(to_flow(t))), want)
    ones = torch.ones_like(t)
    got = flow.jit(lambda a, b: flow.copysign(a, b))(to_flow(ones), to_flow(t))
    assert torch.equal(to_torch(got), torch.copysign(ones, t))


# ---- on a CUDA device ----------------------------------------------------------------------------

# A float16 NaN written by a GPU kernel keeps its sign and payload (jit/cuda/flow_helpers.cuh), so
# traced views give torch's bytes there too, up to the quieting of float16's signaling NaNs.
GPU_PAIRS = [(torch.float16, torch.int16), (torch.bfloat16, torch.int16), (torch.int16, torch.float16),
             (torch.float32, torch.int32), (torch.int64, torch.float64), (torch.float32, torch.uint8),
             (torch.uint8, torch.float32), (torch.float16, torch.bfloat16), (torch.uint8, torch.bool),
             (torch.bfloat16, torch.uint8)]


@pytest.mark.parametrize("src,dst", GPU_PAIRS, ids=lambda d: str(d).replace("torch.", ""))
@ON_GPU[0]
@ON_GPU[1]
def test_views_on_gpu(src, dst, gen):
    t = _every_pattern(src) if src.itemsize == 2 else _source_for(src, dst, (4, 16), gen)
    x = to_flow(t).cuda()
    eager = x.view(FLOW_OF[dst])
    assert eager.device.type == "cuda" and eager._c.storage_ptr() == x._c.storage_ptr()
    _same_bits(eager, t.view(dst), "eager")
    traced = flow.jit(lambda a: a.view(FLOW_OF[dst]))(x)
    if torch.float16 not in (src, dst):
        _same_bits(traced, t.view(dst), "traced")
        return
    # A float16 read on the GPU (cvt.f32.f16) quiets a signaling NaN: those bits gain 0x200, and
    # only those.
    want = t.view(dst).contiguous().view(torch.int16).reshape(-1).long() & 0xFFFF
    got = to_torch(traced.cpu()).contiguous().view(torch.int16).reshape(-1).long() & 0xFFFF
    signaling = ((want & 0x7C00) == 0x7C00) & ((want & 0x3FF) != 0) & ((want & 0x200) == 0)
    assert torch.equal(got[~signaling], want[~signaling])
    assert torch.equal(got[signaling], want[signaling] | 0x200)


@ON_GPU[0]
@ON_GPU[1]
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_signbit_on_gpu(dtype):
    t = _negative_nans(dtype)
    x = to_flow(t).cuda()
    assert torch.equal(to_torch(flow.signbit(x).cpu()), torch.signbit(t))
    assert torch.equal(to_torch(flow.jit(flow.signbit)(x).cpu()), torch.signbit(t))
