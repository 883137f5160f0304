"""torch's runtime switches and helpers that ported scripts call, with flow's meaning for each:
flow.compile (torch.compile's signature over flow.jit), flow.backends (cudnn.benchmark chooses the
convolution search; precision permissions are accepted; what flow cannot honour is refused), memory
formats (channels_last strides, as torch's), pin_memory, and flow.cuda's events, stream and device
queries (marker `gpu` for those that need a device)."""
import pytest
import torch

import flow
from conftest import assert_same, make, to_flow

needs_gpu = [pytest.mark.gpu, pytest.mark.skipif(not flow.cuda.is_available(),
                                                 reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]


def test_compile_is_jit_with_torch_modes(gen):
    m = flow.nn.Sequential(flow.nn.Linear(6, 5), flow.nn.GELU())
    x = to_flow(make((3, 6), torch.float32, gen))
    with flow.no_grad():
        want = m(x)
        c = flow.compile(m)
        assert_same(c(x), to_flow_torch(want), msg="compile(model)")
        assert c.num_traces == 1

        @flow.compile(mode="default", dynamic=True, fullgraph=True)
        def f(a):
            return a.sin() * 2

        assert_same(f(x), torch.from_numpy(x.numpy()).sin() * 2, msg="@compile(...)")
    assert flow.compile(m, mode="reduce-overhead")._jit._cuda_graphs is True
    assert flow.compile(m)._jit._cuda_graphs is False
    assert flow.compile(m, mode="max-autotune")._jit._autotune
    assert flow.compile(m, disable=True) is m and flow.compile(m, backend="eager") is m
    for bad, err in ((dict(mode="fast"), RuntimeError), (dict(backend="aot_eager"), NotImplementedError),
                     (dict(options={"x": 1}), NotImplementedError)):
        with pytest.raises(err):
            flow.compile(m, **bad)


def to_flow_torch(t):
    return torch.from_numpy(t.numpy())


def test_backends_switches():
    cudnn = flow.backends.cudnn
    assert cudnn.benchmark is False
    assert flow.jit(lambda a: a)._conv_search == "heuristic"
    cudnn.benchmark = True
    try:
        assert flow.jit(lambda a: a)._conv_search == "exhaustive"
        assert flow.jit(lambda a: a, conv_search="heuristic")._conv_search == "heuristic"
    finally:
        cudnn.benchmark = False
    cudnn.allow_tf32 = False
    cudnn.allow_tf32 = True
    flow.backends.cuda.matmul.allow_tf32 = True
    cudnn.deterministic = False
    cudnn.enabled = True
    with pytest.raises(NotImplementedError, match="deterministic"):
        cudnn.deterministic = True
    with pytest.raises(NotImplementedError, match="cuDNN"):
        cudnn.enabled = False
    with pytest.raises(AttributeError):
        cudnn.benchmrk = True  # a typo is an error, not a silently ignored attribute
    assert flow.get_float32_matmul_precision() == "highest"
    flow.set_float32_matmul_precision("high")
    assert flow.get_float32_matmul_precision() == "high"
    flow.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError):
        flow.set_float32_matmul_precision("fast")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_gpu)])
def test_channels_last_memory_format(device, gen):
    t = make((2, 3, 4, 5), torch.float32, gen)
    f = to_flow(t).to(device)
    tc, fc = t.contiguous(memory_format=torch.channels_last), f.contiguous(memory_format=flow.channels_last)
    assert tuple(fc._c.strides) == tc.stride()
    assert fc.is_contiguous(memory_format=flow.channels_last) and not fc.is_contiguous()
    assert not f.is_contiguous(memory_format=flow.channels_last)
    assert tuple(f.to(memory_format=flow.channels_last)._c.strides) == tc.stride()
    assert tuple(f.clone(memory_format=flow.channels_last)._c.strides) == tc.stride()
    assert_same(fc.cpu(), tc, rtol=0, atol=0, msg="channels_last values")
    with pytest.raises(RuntimeError, match="rank 4"):
        flow.ones(2, 3).is_contiguous(memory_format=flow.channels_last)
    # A channels_last model and input compute what the NCHW ones do.
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    fconv = flow.nn.Conv2d(3, 4, 3, padding=1)
    fconv.load_state_dict({k: to_flow(v.detach()) for k, v in conv.state_dict().items()})
    fconv = fconv.to(device, memory_format=flow.channels_last)
    assert fconv.weight.is_contiguous(memory_format=flow.channels_last)
    assert fconv.bias.is_contiguous()
    with torch.no_grad(), flow.no_grad():
        want = conv(t)
        assert_same(fconv(fc).cpu(), want, msg="eager channels_last conv")
        assert_same(flow.jit(fconv)(fc).cpu(), want, msg="jit channels_last conv")


def test_pin_memory_is_the_tensor():
    x = flow.ones(3)
    assert x.pin_memory() is x and not x.is_pinned()


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device")
def test_cuda_events_stream_and_queries(gen):
    start, end = flow.cuda.Event(enable_timing=True), flow.cuda.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        start.elapsed_time(end)
    x = to_flow(make((64, 64), torch.float32, gen)).cuda()
    start.record()
    y = (x @ x).relu()
    end.record()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0
    end.synchronize()
    s = flow.cuda.current_stream()
    s.wait_event(end)
    s.synchronize()
    with flow.cuda.stream(s):
        z = y + 1
    tx = torch.from_numpy(x.cpu().numpy())
    # a product of K = 64 terms: summation order differs (cuBLASLt / the CPU), so K-scaled bounds
    assert_same(z.cpu(), (tx @ tx).relu() + 1, rtol=1e-4, atol=1e-4, msg="work around events")
    with pytest.raises(NotImplementedError):
        flow.cuda.Stream()
    assert flow.cuda.current_device() == 0
    major, minor = flow.cuda.get_device_capability()
    assert major >= 5 and minor >= 0
    assert flow.cuda.is_bf16_supported() == (major >= 8)
    flow.cuda.manual_seed_all(3)
    a = flow.randn(4, device="cuda")
    flow.cuda.manual_seed(3)
    assert_same(flow.randn(4, device="cuda").cpu(), torch.from_numpy(a.cpu().numpy()), rtol=0, atol=0,
                msg="cuda.manual_seed")
    with flow.cuda.amp.autocast():
        assert (x @ x).dtype is flow.float16
