"""Eager results keep their inputs' order of dims in memory, as torch's (jit/eager_layout.h):
elementwise ops of channels-last, transposed and sliced inputs, broadcast operands, mixed layouts
(the first input that orders two dims decides), type casts, where, clone, flip, constant pads and
the pools built from them; values and strides against torch's, on the CPU and (marker `gpu`) CUDA."""
import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn.functional as FF
from conftest import assert_same, make, same_memory_order

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]


def twin(t, device):
    """flow's copy of torch tensor `t`, with `t`'s strides (a dense tensor in any dim order)."""
    order = sorted(range(t.ndim), key=lambda d: -t.stride(d))  # outermost first
    dense = flow.as_tensor(t.permute(order).contiguous()).to(device)
    inverse = [order.index(d) for d in range(t.ndim)]
    f = dense.permute(inverse)
    assert f.stride() == t.stride()
    return f


def nhwc(t):
    return t.contiguous(memory_format=torch.channels_last)


CASES = {
    # name: (inputs, fn(lib, F, *inputs))
    "nhwc + nchw": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g)), make((2, 3, 4, 5), dt, g)],
                    lambda L, F, x, y: x + y),
    "nchw + nhwc": (lambda g, dt: [make((2, 3, 4, 5), dt, g), nhwc(make((2, 3, 4, 5), dt, g))],
                    lambda L, F, x, y: x + y),
    "nhwc * channel bias": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g)), make((3, 1, 1), dt, g)],
                            lambda L, F, x, b: x * b),
    "nhwc - row": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g)), make((5,), dt, g)],
                   lambda L, F, x, r: x - r),
    "nhwc slice relu": (lambda g, dt: [nhwc(make((2, 6, 7, 5), dt, g))], lambda L, F, x: x[:, ::2, 1:].relu()),
    "nhwc where": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g))], lambda L, F, x: L.where(x > 0, x, 0.5)),
    "nhwc to float64": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g))], lambda L, F, x: x.to(L.float64)),
    "nhwc times 0-dim": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g)), make((), dt, g)],
                         lambda L, F, x, s: x * s),
    "transposed exp": (lambda g, dt: [make((7, 6), dt, g).t()], lambda L, F, x: x.exp()),
    "permuted 3-d + row": (lambda g, dt: [make((5, 3, 4), dt, g).permute(1, 2, 0), make((5,), dt, g)],
                           lambda L, F, x, r: x + r),
    "nhwc clone": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g))], lambda L, F, x: x.clone()),
    "transposed flip": (lambda g, dt: [make((5, 3, 4), dt, g).permute(1, 2, 0)], lambda L, F, x: x.flip(0)),
    "nhwc pad": (lambda g, dt: [nhwc(make((2, 3, 4, 5), dt, g))], lambda L, F, x: F.pad(x, (1, 2, 0, 1))),
    "nhwc max pool": (lambda g, dt: [nhwc(make((2, 3, 9, 8), dt, g))], lambda L, F, x: F.max_pool2d(x, 3, 2, 1)),
    "nhwc avg pool": (lambda g, dt: [nhwc(make((2, 3, 8, 8), dt, g))], lambda L, F, x: F.avg_pool2d(x, 2)),
    "C == 1 (both orders) + 1": (lambda g, dt: [nhwc(make((2, 1, 4, 5), dt, g))], lambda L, F, x: x + 1),
    "expanded + 1": (lambda g, dt: [make((4, 1, 2), dt, g)], lambda L, F, x: x.expand(4, 7, 2) + 1),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_eager_results_keep_torchs_memory_order(case, dtype, device, gen):
    build, fn = CASES[case]
    ts = build(gen, dtype)
    want = fn(torch, TF, *ts)
    got = fn(flow, FF, *(twin(t, device) for t in ts))
    assert_same(got.cpu(), want, msg=case)
    assert same_memory_order(got, want), f"{case}: strides {got.stride()}, torch's {want.stride()}"


def test_contiguous_and_clone_formats_still_copy_as_asked(gen):
    x = twin(nhwc(make((2, 3, 4, 5), torch.float32, gen)), "cpu")
    c = x.clone(memory_format=flow.contiguous_format)
    assert c.is_contiguous() and c._c.storage_ptr() != x._c.storage_ptr()
    assert flow.clone(x, memory_format=flow.contiguous_format).is_contiguous()
    assert flow.clone(x).is_contiguous(memory_format=flow.channels_last)
    assert x.contiguous().is_contiguous()
    cl = twin(make((2, 3, 4, 5), torch.float32, gen), "cpu").clone(memory_format=flow.channels_last)
    assert cl.is_contiguous(memory_format=flow.channels_last) and not cl.is_contiguous()
    with pytest.raises(RuntimeError, match="unsupported memory format"):
        x.clone(memory_format="nonsense")


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device")
def test_moving_between_devices_keeps_a_dense_layout(gen):
    # torch's .to(device) (preserve_format): a dense tensor keeps its strides, a sliced one comes
    # out contiguous. Checked both ways, values included.
    for t in [nhwc(make((2, 3, 4, 5), torch.float32, gen)), make((7, 6), torch.float16, gen).t()]:
        f = twin(t, "cpu")
        on_gpu = f.cuda()
        assert on_gpu.stride() == t.stride() and on_gpu.to("cuda") is on_gpu
        back = on_gpu.cpu()
        assert back.stride() == t.stride()
        assert_same(back, t, rtol=0, atol=0)
    sliced = twin(make((4, 6), torch.float32, gen), "cpu")[:, ::2]
    moved = sliced.cuda()
    assert moved.is_contiguous()
    assert_same(moved.cpu(), torch.from_numpy(sliced.numpy()), rtol=0, atol=0)
