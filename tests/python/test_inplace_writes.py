"""In-place writes (copy_, fill_, zero_, add_ and the other in-place ops, out=, indexed assignment,
load_state_dict) on the CPU and (marker `gpu`) on CUDA tensors, against the same writes on torch
tensors: dense targets, permuted and sliced views, masks and integer indices, broadcast values,
dtype conversion, and writes through one view seen by the others."""
import numpy as np
import pytest
import torch

import flow
from conftest import TOL, assert_same, make, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]


def both(shape, dtype, gen, device):
    t = make(shape, dtype, gen)
    return t, to_flow(t).to(device)


def same(f, t, msg):
    assert_same(f.cpu(), t, rtol=0, atol=0, msg=msg)


# Each write: fn(lib, x, value_maker) applied to a torch tensor and a flow tensor of the same values.
WRITES = {
    "copy_ dense": lambda L, x, v: x.copy_(v((4, 6))),
    "copy_ broadcast row": lambda L, x, v: x.copy_(v((6,))),
    "copy_ into transposed": lambda L, x, v: x.t().copy_(v((6, 4))),
    "copy_ into slice": lambda L, x, v: x[1:3, ::2].copy_(v((2, 3))),
    "copy_ from int": lambda L, x, v: x.copy_(L.arange(24).reshape(4, 6)),
    "fill_ slice": lambda L, x, v: x[:, 1].fill_(2.5),
    "zero_ column block": lambda L, x, v: x[:, 2:5].zero_(),
    "add_ slice": lambda L, x, v: x[1:].add_(v((3, 6)), alpha=2),
    "mul_ transposed": lambda L, x, v: x.t().mul_(3),
    "clamp_": lambda L, x, v: x.clamp_(-0.5, 0.5),
    "setitem int": lambda L, x, v: x.__setitem__(2, 7.0),
    "setitem slice tensor": lambda L, x, v: x.__setitem__((slice(None), slice(1, 4)), v((4, 3))),
    "setitem step broadcast": lambda L, x, v: x.__setitem__((slice(None, None, 2),), v((6,))),
    "setitem mask": lambda L, x, v: x.__setitem__(x > 0, 0.0),
    "setitem int tensor": lambda L, x, v: x.__setitem__(L.tensor([3, 0]), v((2, 6))),
    "setitem list": lambda L, x, v: x.__setitem__((slice(None), [5, 1]), -1.0),
    "setitem ellipsis": lambda L, x, v: x.__setitem__(Ellipsis, 4.0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("write", list(WRITES))
def test_inplace_write_matches_torch(write, device, gen):
    fn = WRITES[write]
    t, f = both((4, 6), torch.float32, gen, device)
    values = {}

    def value_torch(shape):
        values[shape] = make(shape, torch.float32, gen)
        return values[shape]

    def value_flow(shape):
        return to_flow(values[shape]).to(device)

    base_t, base_f = t, f
    view_t, view_f = t[1:], f[1:]  # another view of the same storage must see the write
    fn(torch, t, value_torch)
    fn(flow, f, value_flow)
    assert f.device.type == device
    same(base_f, base_t, write)
    same(view_f, view_t, write + " (through another view)")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool], ids=str)
def test_inplace_writes_keep_dtype(dtype, device, gen):
    t, f = both((5, 3), dtype, gen, device)
    src = make((5, 3), torch.float64 if dtype.is_floating_point else dtype, gen)
    t[1:4].copy_(src[1:4])
    f[1:4].copy_(to_flow(src[1:4]).to(device))
    t[:, 0] = t[:, 2]
    f[:, 0] = f[:, 2]
    same(f, t, str(dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_out_argument_and_errors(device, gen):
    t, f = both((3, 4), torch.float32, gen, device)
    out = flow.empty(3, 4, device=device)
    r = flow.add(f, 1, out=out)
    assert r is out
    same(out, t + 1, "add(out=)")
    with pytest.raises(RuntimeError, match="shape mismatch"):
        f[0:2] = flow.ones(3, device=device)
    with pytest.raises(RuntimeError, match="single memory location"):
        flow.zeros(1, 4, device=device).expand(3, 4).add_(1)
    # fill_ and zero_ of an expanded tensor write its elements (every copy the same value), as torch's
    base = flow.zeros(2, 1, 4, device=device)
    assert base[:, :, 1:3].expand(2, 5, 2).fill_(7.0).cpu().tolist() == [[[7.0, 7.0]] * 5] * 2
    assert base.cpu().tolist() == [[[0.0, 7.0, 7.0, 0.0]]] * 2
    base.expand(2, 3, 4).zero_()
    assert base.cpu().tolist() == [[[0.0] * 4]] * 2
    with pytest.raises(RuntimeError, match="can't be cast"):
        flow.add(flow.ones(3, device=device), 0.5, out=flow.zeros(3, dtype=flow.int64, device=device))


# (name, call(m, a, b, v, c, i, out)) with a, b float32 3 x 3, v float32 [3], c a bool mask, i int64 [2]
_OUT_CASES = [
    ("add", lambda m, a, b, v, c, i, o: m.add(a, b, out=o)),
    ("exp", lambda m, a, b, v, c, i, o: m.exp(a, out=o)),
    ("sum", lambda m, a, b, v, c, i, o: m.sum(a, 0, out=o)),  # computes in out's dtype
    ("prod", lambda m, a, b, v, c, i, o: m.prod(a * 3, 0, out=o)),
    ("cumsum", lambda m, a, b, v, c, i, o: m.cumsum(a * 3, 0, out=o)),
    ("mean", lambda m, a, b, v, c, i, o: m.mean(a, 0, out=o)),
    ("stack", lambda m, a, b, v, c, i, o: m.stack([a, b], out=o)),
    ("cat", lambda m, a, b, v, c, i, o: m.cat([a, b], out=o)),
    ("outer", lambda m, a, b, v, c, i, o: m.outer(v, v, out=o)),
    ("float_power", lambda m, a, b, v, c, i, o: m.float_power(a, 2, out=o)),
    ("mm", lambda m, a, b, v, c, i, o: m.mm(a, b, out=o)),
    ("matmul", lambda m, a, b, v, c, i, o: m.matmul(a, b, out=o)),
    ("addmm", lambda m, a, b, v, c, i, o: m.addmm(a, a, b, out=o)),
    ("dot", lambda m, a, b, v, c, i, o: m.dot(v, v, out=o)),
    ("matrix_power", lambda m, a, b, v, c, i, o: m.matrix_power(a, 2, out=o)),
    ("amax", lambda m, a, b, v, c, i, o: m.amax(a, 0, out=o)),
    ("argmax", lambda m, a, b, v, c, i, o: m.argmax(a, 0, out=o)),
    ("any", lambda m, a, b, v, c, i, o: m.any(c, 0, out=o)),
    ("index_select", lambda m, a, b, v, c, i, o: m.index_select(a, 0, i, out=o)),
    ("where", lambda m, a, b, v, c, i, o: m.where(c, a, b, out=o)),
    ("clamp", lambda m, a, b, v, c, i, o: m.clamp(a, 0, 1, out=o)),
    ("abs", lambda m, a, b, v, c, i, o: m.abs(a, out=o)),
    ("round", lambda m, a, b, v, c, i, o: m.round(a, out=o)),
    ("nan_to_num", lambda m, a, b, v, c, i, o: m.nan_to_num(a, out=o)),
    ("sort", lambda m, a, b, v, c, i, o: m.sort(a, 0, out=(o, m.empty(0, dtype=m.int64)))[0]),
    ("masked_select", lambda m, a, b, v, c, i, o: m.masked_select(a, c, out=o)),
    ("signbit", lambda m, a, b, v, c, i, o: m.signbit(a, out=o)),
]


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_out_dtype_rules_follow_torch(out_dtype, gen):
    """out= takes any dtype the result can be cast to, except for the functions whose torch kernels
    write only the dtype they compute (matrix products, selections, sorts, rounding, clamp, the
    index and truth reductions): those raise for any other dtype, as torch does."""
    a, b, v = make((3, 3), torch.float32, gen), make((3, 3), torch.float32, gen), make((3,), torch.float32, gen)
    c, i = a > 0, torch.tensor([2, 0])
    fa, fb, fv, fc, fi = (to_flow(t) for t in (a, b, v, c, i))
    for name, call in _OUT_CASES:
        fd = getattr(flow, str(out_dtype).split(".")[1])
        try:
            want = call(torch, a, b, v, c, i, torch.empty(0, dtype=out_dtype))
        except (RuntimeError, TypeError) as e:
            with pytest.raises(type(e)):
                call(flow, fa, fb, fv, fc, fi, flow.empty(0, dtype=fd))
            continue
        got = call(flow, fa, fb, fv, fc, fi, flow.empty(0, dtype=fd))
        # float32 results written to a float64 out: float32's tolerance (exp was an ulp off torch's)
        rtol, atol = TOL[torch.float32] if out_dtype == torch.float64 else (None, None)
        assert_same(got, want, rtol=rtol, atol=atol, msg=f"{name} out={out_dtype}")


@pytest.mark.parametrize("device", DEVICES)
def test_load_state_dict_and_compiled_models_see_writes(device, gen):
    """A model moved to the device first, then loaded: its parameters are written in place. A
    compiled function that read them sees every later write (the storage version changes)."""
    m = flow.nn.Linear(5, 3).to(device)
    ref = torch.nn.Linear(5, 3)
    m.load_state_dict({k: to_flow(v.detach()) for k, v in ref.state_dict().items()})
    x = make((2, 5), torch.float32, gen)
    fx = to_flow(x).to(device)
    with torch.no_grad():
        assert_same(m(fx).cpu(), ref(x), msg="after load_state_dict")
        compiled = flow.jit(m)
        assert_same(compiled(fx).cpu(), ref(x), msg="compiled")
        m.weight.mul_(2)
        m.bias[1] = 10.0
        ref.weight.mul_(2)
        ref.bias[1] = 10.0
        assert_same(compiled(fx).cpu(), ref(x), msg="compiled, after in-place writes to the parameters")
    assert m.weight.device.type == device


def test_device_write_positions_cover_odd_layouts(gen):
    """The host-side position map of non-dense writes, on the CPU path's oracle (numpy): a strided
    view of a permuted tensor written through __setitem__ with a step slice."""
    t, f = both((3, 4, 5), torch.float32, gen, "cpu")
    tv, fv = t.permute(2, 0, 1)[1::2], f.permute(2, 0, 1)[1::2]
    tv[:, 1:, ::3] = 9.0
    fv[:, 1:, ::3] = 9.0
    same(f, t, "permuted step view")
    assert np.isfinite(f.numpy()).all()
