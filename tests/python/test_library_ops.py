"""Library ops (conv2d, conv_transpose2d, matmul, linear) through oneDNN, called with the generic
``flow._C.eager(op, args, attrs)`` and compared with torch.nn.functional; a compiled graph with a
fused epilogue (conv + bias + residual + relu as one library call) through ``flow._C.compile``."""
import pytest
import torch
import torch.nn.functional as TF

import flow
from conftest import to_flow, to_torch

_C = flow._C



def _has_onednn():
    one = flow.tensor([[1.0]])._c
    try:
        _C.eager("matmul", [one, one], {})
    except NotImplementedError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(not _has_onednn(), reason="flow built without oneDNN"),
    # torch warns that it pads a copy for padding="same" with an even kernel; not our concern here.
    pytest.mark.filterwarnings("ignore:Using padding='same'"),
]


def eager(op, args, attrs=None):
    out = _C.eager(op, [a._c if isinstance(a, flow.Tensor) else a for a in args], attrs or {})
    assert len(out) == 1
    return flow.Tensor._wrap(out[0])


def rand(gen, *shape, dtype=torch.float32):
    return torch.rand(shape, generator=gen, dtype=dtype) * 2 - 1


def close(actual, expected, msg=""):
    torch.testing.assert_close(to_torch(actual), expected, rtol=1e-4, atol=1e-4, msg=lambda m: f"{msg}: {m}")


CONV_CASES = [
    # (x shape, weight shape, attrs)
    ((2, 3, 11, 9), (8, 3, 3, 3), {}),
    ((1, 4, 8, 8), (6, 2, 3, 3), {"groups": 2, "stride": [2, 2], "padding": [1, 1]}),
    ((3, 6, 7, 10), (6, 1, 3, 3), {"groups": 6, "padding": [1, 1]}),  # depthwise
    ((2, 5, 9, 9), (4, 5, 1, 1), {}),  # 1x1
    ((1, 3, 12, 12), (2, 3, 3, 2), {"dilation": [2, 1], "padding": [2, 0], "stride": [1, 2]}),
    ((2, 3, 9, 8), (4, 3, 4, 3), {"padding": "same"}),  # asymmetric 'same'
    ((3, 10, 10), (5, 3, 3, 3), {"padding": "valid"}),  # unbatched
]


def _torch_conv_attrs(attrs):
    out = {}
    for k, v in attrs.items():
        out[k] = tuple(v) if isinstance(v, list) else v
    return out


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_matches_torch(gen, case, bias):
    xs, ws, attrs = CONV_CASES[case]
    x, w = rand(gen, *xs), rand(gen, *ws)
    b = rand(gen, ws[0]) if bias else None
    expected = TF.conv2d(x, w, b, **_torch_conv_attrs(attrs))
    args = [to_flow(x), to_flow(w)] + ([to_flow(b)] if bias else [])
    close(eager("conv2d", args, attrs), expected, f"conv2d {xs} {ws} {attrs}")


def test_conv2d_channels_last_and_sliced_inputs(gen):
    x, w = rand(gen, 2, 4, 9, 7), rand(gen, 5, 4, 3, 3)
    expected = TF.conv2d(x, w, padding=1)
    channels_last = to_flow(x.permute(0, 2, 3, 1).contiguous()).permute(0, 3, 1, 2)
    assert not channels_last.is_contiguous()
    close(eager("conv2d", [channels_last, to_flow(w)], {"padding": 1}), expected, "channels-last input")
    big = rand(gen, 2, 4, 9, 15)
    sliced = to_flow(big)[..., ::2]
    close(eager("conv2d", [sliced, to_flow(w)], {"padding": 1}), TF.conv2d(big[..., ::2], w, padding=1), "sliced")


def test_conv_transpose2d_matches_torch(gen):
    for xs, ws, attrs in [((2, 4, 5, 6), (4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
                          ((1, 4, 4, 4), (4, 2, 2, 2), {"stride": 2, "groups": 2}),
                          ((2, 3, 6, 5), (3, 5, 3, 3), {"dilation": 2})]:
        x, w = rand(gen, *xs), rand(gen, *ws)
        b = rand(gen, ws[1] * attrs.get("groups", 1))
        expected = TF.conv_transpose2d(x, w, b, **attrs)
        close(eager("conv_transpose2d", [to_flow(x), to_flow(w), to_flow(b)], attrs), expected, f"{xs} {attrs}")


@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((7,), (7, 4)), ((4, 7), (7,)), ((7,), (7,)),
                                    ((3, 5, 7), (7, 2)), ((2, 1, 5, 7), (3, 7, 4)), ((6,), (2, 6, 3))])
def test_matmul_matches_torch(gen, shapes):
    a, b = rand(gen, *shapes[0]), rand(gen, *shapes[1])
    close(eager("matmul", [to_flow(a), to_flow(b)]), torch.matmul(a, b), f"matmul {shapes}")


def test_matmul_transposed_operands_and_float64(gen):
    a, b = rand(gen, 6, 5), rand(gen, 4, 6)
    close(eager("matmul", [to_flow(a).permute(1, 0), to_flow(b).permute(1, 0)]), a.T @ b.T, "transposed")
    a64, b64 = rand(gen, 3, 4, 5, dtype=torch.float64), rand(gen, 5, 2, dtype=torch.float64)
    out = eager("matmul", [to_flow(a64), to_flow(b64)])
    assert out.dtype is flow.float64
    torch.testing.assert_close(to_torch(out), a64 @ b64)


@pytest.mark.parametrize("xs", [(4, 7), (2, 3, 7), (7,)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_matches_torch(gen, xs, bias):
    x, w = rand(gen, *xs), rand(gen, 5, 7)
    b = rand(gen, 5) if bias else None
    args = [to_flow(x), to_flow(w)] + ([to_flow(b)] if bias else [])
    close(eager("linear", args), TF.linear(x, w, b), f"linear {xs} bias={bias}")


@pytest.mark.parametrize("call", [
    lambda a, b: ("matmul", [a(2, 3), b(4, 5)], {}),
    lambda a, b: ("matmul", [a(7, 2, 3), b(6, 3, 5)], {}),
    lambda a, b: ("matmul", [a(2, 3), b(4)], {}),
    lambda a, b: ("linear", [a(2, 3), b(4, 5)], {}),
    lambda a, b: ("conv2d", [a(2, 3, 8, 8), b(4, 2, 3, 3)], {}),
    lambda a, b: ("conv2d", [a(2, 3, 8, 8), b(4, 3, 9, 9)], {}),
    lambda a, b: ("conv2d", [a(2, 3, 8, 8), b(4, 3, 3, 3)], {"stride": [2, 2], "padding": "same"}),
])
def test_errors_match_torch(gen, call):
    op, targs, attrs = call(lambda *s: rand(gen, *s), lambda *s: rand(gen, *s))
    fn = {"matmul": torch.matmul, "linear": TF.linear, "conv2d": TF.conv2d}[op]
    with pytest.raises(RuntimeError) as expected:
        fn(*targs, **_torch_conv_attrs(attrs))
    with pytest.raises(RuntimeError) as actual:
        eager(op, [to_flow(t) for t in targs], attrs)
    assert str(actual.value) in str(expected.value), (str(actual.value), str(expected.value))


def test_dtype_mismatch_matches_torch(gen):
    a, b = rand(gen, 2, 3), rand(gen, 3, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != double"):
        torch.matmul(a, b)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != double"):
        eager("matmul", [to_flow(a), to_flow(b)])


def test_fused_conv_epilogue_is_one_library_call(gen, monkeypatch):
    monkeypatch.setenv("FLOW_LIBRARY_EPILOGUES", "1")  # epilogue fusion is opt-in (see scheduler/fusion.h)
    n, c, oc, h, w = 2, 3, 4, 7, 6
    g = _C.Graph()
    x = g.add_input([n, c, h, w], "float32")
    wt = g.add_input([oc, c, 3, 3], "float32")
    b = g.add_input([oc, 1, 1], "float32")
    r = g.add_input([n, oc, h, w], "float32")
    (y,) = g.add_op("conv2d", [x, wt], {"padding": 1})
    (y,) = g.add_op("add", [y, b])
    (y,) = g.add_op("add", [y, r])
    (y,) = g.add_op("relu", [y])
    g.mark_output(y)
    tx, tw, tb, tr = rand(gen, n, c, h, w), rand(gen, oc, c, 3, 3), rand(gen, oc, 1, 1), rand(gen, n, oc, h, w)
    exe = _C.compile(g, [[], [], [], []], "cpu", "sm_90", True)
    assert exe.num_kernels == 0
    assert "library call: conv2d (oneDNN) + post-ops [add, add, relu]" in exe.explain(False)
    (out,) = exe.run([to_flow(t)._c for t in (tx, tw, tb, tr)])
    expected = torch.relu(TF.conv2d(tx, tw, padding=1) + tb + tr)
    close(flow.Tensor._wrap(out), expected, "fused conv epilogue")


@pytest.mark.parametrize("jit_first", [False, True])
@pytest.mark.parametrize("conv", ["conv1d", "conv2d"])
def test_one_output_channel_1x1_convolution_eager_and_jit_in_one_process(gen, conv, jit_first):
    """A 1x1 convolution with one output channel, eager (NCHW destination) and under flow.jit (NHWC)
    on the same shapes: oneDNN's own primitive cache handed the second a primitive of the first's
    implementation, which read the weights laid out for its own as the other's, so it used input
    channel 0 alone (found by a helper's fuzzing). oneDNN's cache is off; flow's keys are exact."""
    spatial = (3,) if conv == "conv1d" else (3, 2)
    x = torch.randn((2, 5) + spatial, generator=gen)
    w = torch.randn((1, 5) + (1,) * len(spatial), generator=gen)
    want = getattr(TF, conv)(x, w)
    eager = lambda a, b: getattr(flow.nn.functional, conv)(a, b)  # noqa: E731
    jitted = flow.jit(eager)
    for f in ([jitted, eager] if jit_first else [eager, jitted]) * 2:
        torch.testing.assert_close(to_torch(f(to_flow(x), to_flow(w))), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels", [1, 3, 5])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_bfloat16_convolutions_keep_nonfinite_values_in_their_windows(channels, jit):
    """A bfloat16 convolution with an odd count of input channels per group: an inf or NaN pixel
    makes NaN only in the outputs whose windows read it (oneDNN's bf16 kernels pair channels and
    leaked a neighbour's NaN through a zero weight; jit/library_ops.cpp routes those to float32)."""
    run = (lambda f: flow.jit(f)) if jit else (lambda f: f)
    x2 = torch.ones(2, channels, 5, 6, dtype=torch.bfloat16)
    x2[0, 0, 2, 1], x2[1, channels - 1, 3, 4] = float("nan"), float("inf")
    w2 = torch.ones(3, channels, 3, 1, dtype=torch.bfloat16)
    x3 = torch.ones(1, channels, 3, 5, 4, dtype=torch.bfloat16)
    x3[0, 0, 1, 2, 1] = float("-inf")
    w3 = torch.randn(2, channels, 1, 3, 1).to(torch.bfloat16).abs()
    xt = torch.ones(1, channels, 4, 4, dtype=torch.bfloat16)
    xt[0, 0, 1, 2] = float("nan")
    wt = torch.ones(channels, 2, 2, 2, dtype=torch.bfloat16)
    cases = [("conv2d", TF.conv2d, flow.nn.functional.conv2d, x2, w2, {}),
             ("conv3d", TF.conv3d, flow.nn.functional.conv3d, x3, w3, {"padding": (0, 1, 0)}),
             ("conv_transpose2d", TF.conv_transpose2d, flow.nn.functional.conv_transpose2d, xt, wt, {"stride": 2})]
    for name, tfn, ffn, x, w, kw in cases:
        want = tfn(x, w, **kw)
        got = to_torch(run(lambda a, b: ffn(a, b, **kw))(to_flow(x), to_flow(w)))
        assert got.dtype == torch.bfloat16
        assert torch.equal(got.isnan(), want.isnan()), f"{name}: NaN at {got.isnan().nonzero().tolist()}"
        assert torch.equal(got.isinf(), want.isinf()), name
        finite = ~want.isnan() & ~want.isinf()
        torch.testing.assert_close(got[finite].float(), want[finite].float(), rtol=1e-2, atol=1e-2, msg=name)
