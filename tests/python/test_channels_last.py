"""The channels-last layout pass under @flow.jit (scheduler/channels_last.h): convolutions and the
ops between them run on NHWC values, and the results are torch's, with the pass on and off."""
import pytest
import torch

import flow
from conftest import assert_same, to_flow


def _block(lib):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False)
            self.bn = nn.BatchNorm2d(16)
            self.pool = nn.MaxPool2d(3, 2, 1)
            self.c2 = nn.Conv2d(16, 16, 3, padding=1)
            self.c3 = nn.Conv2d(16, 16, 1)
            self.down = nn.Conv2d(16, 32, 1, stride=2)

        def forward(self, x):
            y = self.pool(lib.relu(self.bn(self.stem(x))))
            z = lib.relu(self.c2(y))
            r = lib.relu(self.c3(z) + y)
            d = self.down(r)
            return d.mean((2, 3)), z

    return Block()


def _jitted_twins(build, gen):
    """torch's eval-mode module from `build(torch)`, its batch norms' statistics randomized, and
    flow's compiled twin with the same weights."""
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
    tm = build(torch).eval()
    for m in tm.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
    fm = build(flow)
    fm.load_state_dict(tm.state_dict())
    fm.eval()
    return tm, flow.jit(fm)


def _outputs(tm, jm, x):
    """torch's outputs and flow's compiled ones for input `x`."""
    with torch.no_grad():
        want = tm(x)
    with flow.no_grad():
        return want, jm(to_flow(x))


@pytest.mark.parametrize("shape", [(1, 3, 33, 31), (3, 3, 20, 24), (2, 3, 9, 9)], ids=str)
@pytest.mark.parametrize("enabled", [True, False], ids=["nhwc", "off"])
def test_resnet_block_matches_torch(shape, enabled, monkeypatch, gen):
    if not enabled:
        monkeypatch.setenv("FLOW_CHANNELS_LAST", "0")
    tm, jm = _jitted_twins(_block, gen)
    x = torch.randn(*shape, generator=gen)
    want, got = _outputs(tm, jm, x)
    with flow.no_grad():
        got_again = jm(to_flow(x))
    for g, g2, w in zip(got, got_again, want):
        assert_same(g, w, rtol=1e-4, atol=1e-4, msg=jm.explain(with_source=False)[-3000:])
        assert_same(g2, w, rtol=1e-4, atol=1e-4)
    text = jm.explain(with_source=False)
    if enabled:
        assert "channels-last: 4 convolution(s) produce NHWC" in text, text[-3000:]
        # The returned z is an NCHW view of an NHWC buffer; it behaves like any tensor.
        assert not got[1].is_contiguous()
        assert_same(got[1].contiguous() * 2.0, want[1] * 2.0, rtol=1e-4, atol=1e-4)
    else:
        assert "channels-last" not in text


def _strided_readers(lib):
    nn = lib.nn

    class StridedReaders(nn.Module):
        """Convolutions read by ops that address memory: avg_pool2d's window view (as_strided of a
        padded value), Tensor.unfold, and as_strided itself, straight off a convolution."""

        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(4, 8, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 6, 1)
            self.pool = nn.AvgPool2d(2, 2)
            self.c3 = nn.Conv2d(6, 5, 1)

        def forward(self, x):
            y = self.pool(self.c2(lib.relu(self.bn(self.c1(x)))))  # the pad before the pool goes NHWC
            z = self.c3(y)
            h, w = z.shape[2], z.shape[3]
            n, c = z.shape[0], z.shape[1]
            corner = z.as_strided((n, c, h - 1, w - 1), (c * h * w, h * w, w, 1))
            # Through views, as_strided addresses the buffer at their root (found by review).
            rows = z[:, :, 1:, :].as_strided((n, c, h - 2, w - 1), (c * h * w, h * w, w, 1))
            turned = z.transpose(2, 3).as_strided((n, c, h, w - 1), (c * h * w, h * w, w, 1))
            flat = z.reshape(n, c, h * w).as_strided((n, c, h * w - 3), (c * h * w, h * w, 1), 2)
            return lib.cat([y, self.c3(y) * 2.0], 1), corner, z.unfold(3, 2, 1), rows, turned, flat

    return StridedReaders()


@pytest.mark.parametrize("enabled", [True, False], ids=["nhwc", "off"])
def test_memory_addressing_readers_of_nhwc_values(enabled, monkeypatch, gen):
    """The pass once fed a permute view of an NHWC value to as_strided, which addresses the input's
    memory and so read the NHWC buffer with NCHW strides (DenseNet's transitions: 29% off); then
    the same through a slice, a transpose or a reshape of it."""
    if not enabled:
        monkeypatch.setenv("FLOW_CHANNELS_LAST", "0")
    tm, jm = _jitted_twins(_strided_readers, gen)
    x = torch.randn(2, 4, 10, 12, generator=gen)
    want, got = _outputs(tm, jm, x)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-4, atol=1e-4, msg=jm.explain(with_source=False)[-3000:])
    if enabled:
        assert "channels-last:" in jm.explain(with_source=False)


def _grouped(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.GroupNorm(4, 16), nn.SiLU(),
                         nn.Conv2d(16, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 1))


def test_group_norm_keeps_its_convolution_nchw(gen):
    """Group norm splits the channels into groups; on NHWC data its reductions would read each
    group strided across the image, so the convolution it reads stays NCHW while the rest go NHWC."""
    tm, jm = _jitted_twins(_grouped, gen)
    x = torch.randn(2, 3, 17, 20, generator=gen)
    want, got = _outputs(tm, jm, x)
    assert_same(got, want, rtol=1e-4, atol=1e-4)
    assert "channels-last: 2 convolution(s) produce NHWC" in jm.explain(with_source=False)


def _decoder(lib):
    nn = lib.nn

    class Decoder(nn.Module):
        """A U-Net decoder step: upsample a convolution's output, concatenate the skip, convolve."""

        def __init__(self, mode):
            super().__init__()
            self.mode = mode
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.skip = nn.Conv2d(3, 4, 3, stride=1, padding=1)
            self.c2 = nn.Conv2d(12, 6, 3, padding=1)

        def forward(self, x):
            kw = {"align_corners": False} if self.mode == "bilinear" else {}
            up = lib.nn.functional.interpolate(lib.relu(self.c1(x)), scale_factor=2, mode=self.mode, **kw)
            s = lib.nn.functional.interpolate(self.skip(x), size=up.shape[2:], mode="nearest")
            y = self.c2(lib.cat([up, s], 1))
            return y, up

    return Decoder


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_resizing_runs_on_nhwc_values(mode, gen):
    """Resizing's row and column taps (index_select along H and W) run on the convolutions' NHWC
    values, channels innermost, so the concatenation after them reads no transposed input. A
    resized channels-last input is returned channels-last, as torch returns it."""
    tm, jm = _jitted_twins(lambda lib: _decoder(lib)(mode), gen)
    x = torch.randn(2, 3, 9, 7, generator=gen)
    want, got = _outputs(tm, jm, x)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-4, atol=1e-4)
    text = jm.explain(with_source=False)
    assert "channels-last: 3 convolution(s) produce NHWC" in text, text[-3000:]
    graph = text[:text.index("== fusion")]
    assert all("dim=1" in line or "dim=2" in line for line in graph.splitlines() if "index_select(" in line), graph
    x = torch.randn(2, 5, 6, 7, generator=gen).contiguous(memory_format=torch.channels_last)
    kw = {"align_corners": False} if mode == "bilinear" else {}
    want = torch.nn.functional.interpolate(x, scale_factor=2, mode=mode, **kw)
    got = flow.jit(lambda t: flow.nn.functional.interpolate(t, scale_factor=2, mode=mode, **kw))(
        to_flow(x).contiguous(memory_format=flow.channels_last))
    assert_same(got, want, rtol=1e-5, atol=1e-5)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
