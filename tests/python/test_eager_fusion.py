"""Eager calls of composite functions (max_pool2d, avg_pool2d) run as one compiled graph
(flow/_eager_fusion.py): one kernel launch, torch's values and strides, one variant per signature
with a cap, inline in a trace, op by op under flow.autocast."""
import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn.functional as FF
from flow import _eager_fusion
from conftest import assert_same, make

POOLS = {
    "max_pool2d 3/2/1": (lambda F, x: F.max_pool2d(x, 3, 2, 1)),
    "max_pool2d ceil dilated": (lambda F, x: F.max_pool2d(x, 2, 2, 0, 2, ceil_mode=True)),
    "avg_pool2d 3/2/1": (lambda F, x: F.avg_pool2d(x, 3, 2, 1)),
    "avg_pool2d excluding pad": (lambda F, x: F.avg_pool2d(x, 2, 1, 1, count_include_pad=False)),
    "max_pool1d": (lambda F, x: F.max_pool1d(x.flatten(2), 4, 3)),
}


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("pool", list(POOLS))
def test_eager_pool_is_one_kernel_with_torchs_values(pool, dtype, channels_last, gen):
    fn = POOLS[pool]
    for shape in [(2, 3, 9, 8), (1, 5, 4, 7)]:
        x = make(shape, dtype, gen, special=True)
        f = flow.as_tensor(x)
        if channels_last:
            x, f = x.contiguous(memory_format=torch.channels_last), f.contiguous(memory_format=flow.channels_last)
        want = fn(TF, x)
        fn(FF, f)  # the first call traces and compiles
        flow.reset_launch_count()
        got = fn(FF, f)
        assert flow.launch_count() == 1, pool
        assert_same(got, want, msg=f"{pool} {shape}")
        if got.ndim == 4:
            assert got.is_contiguous(memory_format=flow.channels_last) == channels_last, got.stride()


def test_op_by_op_under_autocast_and_inline_in_a_trace(gen):
    x = flow.as_tensor(make((2, 3, 8, 8), torch.float32, gen))
    FF.max_pool2d(x, 3, 2, 1)
    with flow.autocast("cpu"):
        flow.reset_launch_count()
        FF.max_pool2d(x, 3, 2, 1)
        assert flow.launch_count() > 1  # each tap and maximum, as before
    jitted = flow.jit(lambda a: FF.max_pool2d(a, 3, 2, 1).relu() + 1)
    assert_same(jitted(x), TF.max_pool2d(torch.from_numpy(x.numpy()), 3, 2, 1).relu() + 1)
    assert jitted.num_kernels == 1, jitted.explain(with_source=False)


def test_variants_are_capped_oldest_first(gen, monkeypatch):
    monkeypatch.setattr(_eager_fusion, "_MAX_VARIANTS", 2)
    pool = _eager_fusion.fused_in_eager(lambda x, k: FF.max_pool2d.__wrapped__(x, k))
    x = flow.as_tensor(make((1, 2, 8, 8), torch.float32, gen))
    for k in (2, 3, 2, 4, 2):  # the last call traces again: k=2's variant was the oldest of three
        assert_same(pool(x, k), TF.max_pool2d(torch.from_numpy(x.numpy()), k))
        assert len(pool.jitted._variants) <= 2
    assert pool.jitted.num_traces == 4
