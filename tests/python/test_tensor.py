"""flow.Tensor's torch-like surface: creation and dtype inference, numpy/torch interop (bfloat16
bit-exact), views sharing storage, indexing, printing, and nn.Module bookkeeping."""
import numpy as np
import pytest
import torch

import flow
from conftest import ALL_DTYPES, FLOW_OF, assert_same, make, raises_like, to_flow, to_torch


def test_dtypes_print_and_alias_like_torch():
    for t, f in FLOW_OF.items():
        assert repr(f) == repr(t).replace("torch.", "flow.")
        assert f.is_floating_point == t.is_floating_point
        assert f.itemsize == t.itemsize
    assert flow.float is flow.float32 and flow.half is flow.float16 and flow.double is flow.float64
    assert flow.long is flow.int64 and flow.int is flow.int32
    assert str(flow.device("cpu")) == "cpu" and flow.ones(2).device == flow.device("cpu")


@pytest.mark.parametrize("data", [[1.0, 2.5], [1, 2, 3], [True, False], 3.5, 7, True, [[1, 2], [3, 4]], [],
                                  [1, 2.5], [True, 2]])
def test_tensor_dtype_inference(data):
    t = torch.tensor(data)
    f = flow.tensor(data)
    assert_same(f, t)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_tensor_with_dtype_and_conversions(dtype, gen):
    data = [[1.5, -2.25, 0.0], [3.0, 1e3, -7.75]]  # 1e3 overflows the small ints: both raise
    if not raises_like(lambda: torch.tensor(data, dtype=dtype), lambda: flow.tensor(data, dtype=FLOW_OF[dtype])):
        assert_same(flow.tensor(data, dtype=FLOW_OF[dtype]), torch.tensor(data, dtype=dtype))
    data = [[1.5, 2.25, 0.0], [3.0, 100, 7.75]]
    assert_same(flow.tensor(data, dtype=FLOW_OF[dtype]), torch.tensor(data, dtype=dtype))
    t = make((3, 4), dtype, gen)
    assert_same(flow.as_tensor(t), t)  # torch -> flow, bit-exact (bfloat16 via int16)
    assert_same(flow.tensor(t.t()), t.t().contiguous())
    if dtype != torch.bfloat16:
        n = t.numpy()
        assert_same(flow.from_numpy(n), t)
        f = flow.from_numpy(n)
        assert np.array_equal(f.numpy(), n) and f.numpy().dtype == n.dtype
        assert f.tolist() == t.tolist()
    else:
        with pytest.raises(TypeError, match="Got unsupported ScalarType BFloat16"):
            flow.as_tensor(t).numpy()
        assert flow.as_tensor(t).tolist() == t.float().tolist()
    assert flow.as_tensor(t)[1, 2].item() == t[1, 2].item()


def test_as_tensor_keeps_flow_tensors_and_accepts_numpy_scalars():
    f = flow.ones(3)
    assert flow.as_tensor(f) is f
    assert flow.as_tensor(f, dtype=flow.float64).dtype is flow.float64
    assert flow.tensor(np.float16(1.5)).dtype is flow.float16
    assert flow.tensor(np.arange(4, dtype=np.int32)).dtype is flow.int32
    assert flow.tensor([1.0, 2.0], dtype=flow.bfloat16).tolist() == [1.0, 2.0]


def test_creation_ops_match_torch():
    assert_same(flow.zeros(2, 3), torch.zeros(2, 3))
    assert_same(flow.ones((4,), dtype=flow.int32), torch.ones((4,), dtype=torch.int32))
    assert_same(flow.full((2, 2), 7), torch.full((2, 2), 7))
    assert_same(flow.full((2,), 1.5), torch.full((2,), 1.5))
    assert_same(flow.full((2,), True), torch.full((2,), True))
    assert_same(flow.arange(5), torch.arange(5))
    assert_same(flow.arange(1, 4, 0.5), torch.arange(1, 4, 0.5))
    assert_same(flow.zeros_like(flow.ones(3, dtype=flow.float16)), torch.zeros(3, dtype=torch.float16))
    assert flow.empty(2, 0).shape == (2, 0)
    flow.manual_seed(3)
    a = flow.rand(4, 5)
    flow.manual_seed(3)
    assert flow.rand(4, 5).tolist() == a.tolist()
    assert 0 <= a.amin().item() and a.amax().item() < 1
    assert flow.randn(100, dtype=flow.float64).dtype is flow.float64
    with pytest.raises(RuntimeError):
        flow.zeros(-1)


def test_metadata():
    f = flow.zeros(2, 3, 4)
    assert f.shape == (2, 3, 4) and f.size() == (2, 3, 4) and f.size(-1) == 4
    assert repr(f.shape) == "flow.Size([2, 3, 4])"
    assert f.ndim == 3 and f.dim() == 3 and f.numel() == 24 and len(f) == 2
    assert f.stride() == (12, 4, 1) and f.stride(0) == 12 and f.is_contiguous()
    assert f.element_size() == 4 and f.is_floating_point() and not f.requires_grad


def test_views_share_storage_and_match_torch(gen):
    t = make((4, 6), torch.float32, gen)
    f = to_flow(t)
    views = [
        (lambda x: x.t(), "t"), (lambda x: x.T, "T"), (lambda x: x.transpose(0, 1), "transpose"),
        (lambda x: x.permute(1, 0), "permute"), (lambda x: x[1:3], "rows"), (lambda x: x[:, ::2], "step"),
        (lambda x: x[..., 1], "ellipsis int"), (lambda x: x[None, 2, -2:], "none int slice"),
        (lambda x: x[:, None].expand(4, 3, 6), "expand"), (lambda x: x.unsqueeze(0), "unsqueeze"),
        (lambda x: x[:1].squeeze(0), "squeeze"), (lambda x: x.view(3, 8), "view"), (lambda x: x.reshape(-1), "reshape"),
        (lambda x: x.t().reshape(24), "reshape copy"), (lambda x: x.flatten(), "flatten"),
        (lambda x: x.narrow(1, 2, 3), "narrow"), (lambda x: x[3], "int"), (lambda x: x[2:2], "empty"),
    ]
    for fn, name in views:
        tv, fv = fn(t), fn(f)
        assert_same(fv, tv.contiguous() if not tv.is_contiguous() else tv, msg=name)
        assert tuple(fv.shape) == tuple(tv.shape), name
        if name != "reshape copy" and tv.numel() > 0:
            assert fv.stride() == tv.stride(), name
            assert fv.storage_offset() == tv.storage_offset(), name
    # a write through a view is seen by the base
    v = f[1:3, ::2]
    v.fill_(0.0)
    t[1:3, ::2] = 0.0
    assert_same(f, t)
    f[0] = 5.0
    t[0] = 5.0
    assert_same(f, t)


def test_contiguous_copies_non_contiguous(gen):
    t = make((5, 7), torch.float16, gen)
    f = to_flow(t).t()
    c = f.contiguous()
    assert c.is_contiguous() and not f.is_contiguous()
    assert_same(c, t.t().contiguous())
    g = flow.ones(3)
    assert g.contiguous() is g


def test_repr_like_torch():
    assert repr(flow.tensor([1.0, 2.0, 3.0])) == repr(torch.tensor([1.0, 2.0, 3.0]))
    assert repr(flow.tensor([1, 2])) == repr(torch.tensor([1, 2]))
    assert repr(flow.tensor([True, False])) == repr(torch.tensor([True, False]))
    assert repr(flow.tensor([1.5, 2.0], dtype=flow.float16)) == "tensor([1.5000, 2.0000], dtype=flow.float16)"
    assert repr(flow.tensor(2.5)) == repr(torch.tensor(2.5))
    assert "dtype=flow.int32" in repr(flow.tensor([1], dtype=flow.int32))
    assert "nan" in repr(flow.tensor([float("nan"), 1.0]))
    for dtype in ("float32", "int64", "bool", "int32"):  # empty: every dtype but float32 is named
        for shape in ((0,), (2, 0)):
            want = repr(torch.zeros(shape, dtype=getattr(torch, dtype))).replace("torch.", "flow.")
            assert repr(flow.zeros(shape, dtype=getattr(flow, dtype))) == want


def test_item_and_python_conversions():
    assert flow.tensor([[3]]).item() == 3
    assert float(flow.tensor(2.5)) == 2.5 and int(flow.tensor(7)) == 7
    assert bool(flow.tensor(0.0)) is False
    assert flow.tensor(1.5, dtype=flow.bfloat16).item() == 1.5
    assert [x.item() for x in flow.tensor([1, 2, 3])] == [1, 2, 3]
    assert np.asarray(flow.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]


def test_tensors_are_hashable_and_eq_is_elementwise():
    a, b = flow.ones(2), flow.ones(2)
    assert len({a, b}) == 2
    assert (a == b).tolist() == [True, True]
    assert (a == "x") is False


def test_module_registration():
    class M(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = flow.nn.Parameter(flow.ones(3))
            self.sub = flow.nn.Sequential(flow.nn.ReLU(), flow.nn.Sigmoid())
            self.register_buffer("running", flow.zeros(3))
            self.plain = flow.ones(2)  # not a parameter

        def forward(self, x):
            return self.sub(x * self.w + self.running)

    m = M()
    assert [n for n, _ in m.named_parameters()] == ["w"]
    assert [n for n, _ in m.named_buffers()] == ["running"]
    assert [n for n, _ in m.named_modules()] == ["", "sub", "sub.0", "sub.1"]
    assert m.training and not m.eval().training and not m.sub[0].training and m.train().sub[1].training
    assert isinstance(m.w, flow.nn.Parameter) and isinstance(m.w, flow.Tensor)
    sd = m.state_dict()
    assert list(sd) == ["w", "running"]
    m.load_state_dict({"w": np.array([1.0, 2.0, 3.0], dtype=np.float32), "running": torch.ones(3)})
    assert m.w.tolist() == [1.0, 2.0, 3.0] and m.running.tolist() == [1.0, 1.0, 1.0]
    x = torch.tensor([-1.0, 0.5, 2.0])
    assert_same(m(to_flow(x)), torch.sigmoid(torch.relu(x * torch.tensor([1.0, 2.0, 3.0]) + 1)))
    assert_same(flow.jit(m)(to_flow(x)), torch.sigmoid(torch.relu(x * torch.tensor([1.0, 2.0, 3.0]) + 1)))
    with pytest.raises(RuntimeError):
        m.load_state_dict({"w": np.ones(4, dtype=np.float32), "running": np.ones(3, dtype=np.float32)})
    with pytest.raises(TypeError):
        m.w = flow.ones(3)  # a plain tensor where a parameter is registered


def test_flow_as_torch_port(gen):
    """`import flow as torch` for an elementwise model: the same source runs on both."""
    def model(lib, x, w):
        h = lib.nn.functional.gelu(x * w + 0.1)
        return lib.softmax(h, dim=-1), h.sum(-1, keepdim=True).sigmoid()

    x, w = make((4, 9), torch.float32, gen), make((9,), torch.float32, gen)
    fs, fh = model(flow, to_flow(x), to_flow(w))
    ts, th = model(torch, x, w)
    assert_same(fs, ts, rtol=1e-5, atol=1e-6)
    assert_same(fh, th, rtol=1e-5, atol=1e-5)
    _ = to_torch
