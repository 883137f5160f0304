"""torch.flip as flow's own injective op (dsl/ops/injective.cpp): every dtype, layout, edge size and
combination of dims against torch, eagerly, under @flow.jit (fused with its consumers) and on the
device; the shapes where the CPU vector loop reads reversed data with one load and a shuffle (a
reversed contiguous row; a flipped row of RGB pixels, reversed groups of 3 in the flat loop over
W and C); and torch's errors."""
import itertools

import pytest
import torch

import flow
from conftest import ALL_DTYPES, assert_same, raises_like, same_memory_order, to_flow
from test_tensor_api import make_pair

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_flip_every_dtype_and_layout(dtype, device, gen):
    for shape, layout in itertools.product([(3, 1, 5), (2, 0, 3), (4, 7, 2)], LAYOUTS):
        t, f = make_pair(shape, dtype, gen, layout)
        f = f.to(device)
        for dims in [(0,), (-1,), (0, 2), (1, 2), (0, 1, 2), ()]:
            what = f"{shape} {layout} dims={dims}"
            got = f.flip(dims)
            want = t.flip(dims)
            assert_same(got.cpu(), want, msg=what)
            if f.numel():  # a copy, in its input's order of dims in memory, as torch's
                assert got._c.storage_ptr() != f._c.storage_ptr(), what
                assert same_memory_order(got, want), what
            jitted = flow.jit(lambda x, dims=dims: x.flip(dims))(f)
            assert_same(jitted.cpu(), t.flip(dims), msg=what + " jit")


@pytest.mark.parametrize("device", DEVICES)
def test_flip_fuses_with_its_consumers(device, gen):
    """A horizontal flip and threshold of a uint8 NHWC batch compiles into one kernel with no
    index tensor (a flip op, not an index_select), equal to torch's result."""
    img = torch.randint(0, 256, (3, 9, 37, 3), generator=gen, dtype=torch.uint8)
    fimg = to_flow(img).to(device)

    def chain(m, x):
        return (x.flip(2) > 128).to(m.uint8) * x

    j = flow.jit(lambda x: chain(flow, x))
    assert_same(j(fimg).cpu(), chain(torch, img))
    assert j.num_kernels == 1
    text = j.explain(with_source=False)
    assert "flip(" in text and "index_select" not in text, text


@pytest.mark.parametrize("width", [1, 2, 7, 8, 9, 31, 33, 100, 257])
def test_reversed_rows_of_every_length(width, gen):
    """Rows reversed along a contiguous innermost dim and along W of an NHWC image: widths that end
    mid-vector, fill whole vectors or need a remainder loop, in float32 and uint8."""
    for dtype in (torch.float32, torch.uint8):
        x = torch.randint(0, 256, (3, width), generator=gen).to(dtype)
        fx = to_flow(x)
        assert_same(flow.jit(lambda v: v.flip(-1) * 2)(fx), x.flip(-1) * 2, msg=f"row {dtype}")
        img = torch.randint(0, 256, (2, 3, width, 3), generator=gen, dtype=torch.uint8)
        fimg = to_flow(img)
        got = flow.jit(lambda v: v.flip(2).float() - v.float())(fimg)
        assert_same(got, img.flip(2).float() - img.float(), msg=f"pixels {width}")
        got = flow.jit(lambda v: v.permute(0, 3, 1, 2).flip(3).float() / 255)(fimg)
        assert_same(got, img.permute(0, 3, 1, 2).flip(3).float() / 255, msg=f"NCHW {width}")


def test_flip_helpers(gen):
    t, f = make_pair((4, 5, 3), torch.float32, gen, "transposed")
    for name, fn in [("fliplr", lambda L, x: L.fliplr(x)), ("flipud", lambda L, x: L.flipud(x)),
                     ("rot90", lambda L, x: L.rot90(x, 1, (0, 2))), ("rot90 k=2", lambda L, x: L.rot90(x, 2)),
                     ("rot90 k=-1", lambda L, x: L.rot90(x, -1, (1, 2)))]:
        assert_same(fn(flow, f), fn(torch, t), msg=name)
        assert_same(flow.jit(lambda x, fn=fn: fn(flow, x))(f), fn(torch, t), msg=name + " jit")


def test_flip_of_a_scalar_tensor():
    for dims in [(0,), (-1,), ()]:
        assert_same(flow.tensor(5.0).flip(dims), torch.tensor(5.0).flip(dims), msg=str(dims))
        assert_same(flow.jit(lambda x, dims=dims: x.flip(dims))(flow.tensor(5.0)), torch.tensor(5.0), msg=str(dims))


def test_flip_errors(gen):
    t, f = make_pair((2, 3), torch.float32, gen)
    for dims in [(0, 0), (2,), (-3,), (1, -1)]:
        assert raises_like(lambda: t.flip(dims), lambda: f.flip(dims)), dims
        assert raises_like(lambda: t.flip(dims), lambda: flow.jit(lambda x: x.flip(dims))(f)), dims
    with pytest.raises(RuntimeError, match="appears multiple times"):
        f.flip(1, -1)
