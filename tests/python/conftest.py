"""Shared fixtures for flow's Python tests: torch is the oracle.

Inputs are fresh random each run; the run's seed is printed in the pytest header and can be
replayed with FLOW_TEST_SEED=<seed>. Each test derives its own generator from the seed and its
node id, so a single test replays alone too.
"""
import os
import random
import zlib

import numpy as np
import pytest
import torch

import flow

SEED = int(os.environ.get("FLOW_TEST_SEED", random.SystemRandom().randrange(2**31)))

# Where the GPU tests run PyTorch's reference: on the GPU when torch has one, else on the CPU (under
# the emulated device of tools/emulated_gpu_pytest.sh, where only flow sees a "GPU").
TDEV = "cuda" if torch.cuda.is_available() else "cpu"


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (run by tools/gpu_check.sh)")
    config.addinivalue_line("markers", "slow: a long test (still part of make test)")


def pytest_report_header(config):
    return f"flow test seed: {SEED} (replay with FLOW_TEST_SEED={SEED})"


def pytest_runtest_makereport(item, call):
    if call.excinfo is not None and call.when == "call":
        item.add_report_section("call", "seed", f"FLOW_TEST_SEED={SEED}")


@pytest.fixture(autouse=True)
def _no_pending_device_error(request):
    """After each GPU test, a synchronize: a CUDA kernel's report of bad data (an index out of range,
    runtime/device_error.h) that the test left unread fails that test, not whichever test synchronizes
    next in the same process."""
    yield
    if request.node.get_closest_marker("gpu") is not None and flow.cuda.is_available():
        flow.cuda.synchronize()


@pytest.fixture
def gen(request):
    """A torch.Generator seeded from the run seed and the test's id."""
    g = torch.Generator()
    g.manual_seed((SEED * 1000003 + zlib.crc32(request.node.nodeid.encode())) % 2**63)
    flow.manual_seed(g.initial_seed() % 2**32)
    return g


# ---- dtype maps and conversions ---------------------------------------------------------------

FLOW_OF = {torch.float32: flow.float32, torch.float16: flow.float16, torch.bfloat16: flow.bfloat16,
           torch.float64: flow.float64, torch.int32: flow.int32, torch.int64: flow.int64, torch.bool: flow.bool,
           torch.uint8: flow.uint8, torch.int8: flow.int8, torch.int16: flow.int16}
TORCH_OF = {v: k for k, v in FLOW_OF.items()}
SMALL_INT_DTYPES = [torch.uint8, torch.int8, torch.int16]
ALL_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.bool,
              *SMALL_INT_DTYPES]
FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def to_torch(t):
    """A flow tensor as a torch tensor (bit-exact, bfloat16 included)."""
    assert isinstance(t, flow.Tensor), type(t)
    if t.dtype is flow.bfloat16:
        bits = t._c.numpy_raw().view(np.int16)
        return torch.from_numpy(bits.copy()).view(torch.bfloat16)
    return torch.from_numpy(t.numpy())


def to_flow(t):
    return flow.as_tensor(t)


def make(shape, dtype, gen, special=False, low=None, high=None, no_posinf=False):
    """A random torch tensor of `dtype`. Floats are N(0, 2) (plus NaN/inf/zeros when `special`),
    ints uniform in [low, high), bools fair coins. no_posinf: no +inf among the special values."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if not dtype.is_floating_point:
        lo = -20 if low is None else low
        hi = 20 if high is None else high
        return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * 2
    if low is not None or high is not None:
        lo = 0.0 if low is None else low
        hi = 1.0 if high is None else high
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo
    x = x.to(dtype)
    if special and x.numel() > 0:
        vals = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0], dtype=dtype)
        flat = x.reshape(-1)
        idx = torch.randint(0, flat.numel(), (min(flat.numel(), 8),), generator=gen)
        for k, i in enumerate(idx.tolist()):
            flat[i] = vals[k % len(vals)]
        if no_posinf:
            x = x.masked_fill(x == float("inf"), 1.0)
    return x


# ---- comparison ---------------------------------------------------------------------------------

# (rtol, atol) by result dtype; the brief's float32 / float16 / bfloat16 values.
TOL = {torch.float32: (1.3e-6, 1e-5), torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
       torch.float64: (1e-7, 1e-7)}


def same_memory_order(got, want):
    """flow tensor `got` has torch tensor `want`'s strides on every dim of more than one element (a
    size-1 dim's stride is arbitrary)."""
    return all(a == b for a, b, n in zip(got.stride(), want.stride(), want.shape) if n > 1)


def assert_same(actual, expected, rtol=None, atol=None, msg=""):
    """flow result `actual` equals torch result `expected`: same dtype and shape, values within
    the dtype's tolerance (exact for ints and bools), NaN exactly where torch has NaN."""
    a = to_torch(actual)
    assert a.dtype == expected.dtype, f"{msg}: dtype {a.dtype} != torch's {expected.dtype}"
    assert a.shape == expected.shape, f"{msg}: shape {tuple(a.shape)} != torch's {tuple(expected.shape)}"
    if expected.dtype.is_floating_point:
        r, t = TOL[expected.dtype]
        rtol = r if rtol is None else rtol
        atol = t if atol is None else atol
        torch.testing.assert_close(a, expected, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{msg}: {m}")
    else:
        assert torch.equal(a, expected), f"{msg}: {a} != {expected}"


def products_atol(magnitude, terms, dtype=torch.float32):
    """atol for a result made of sums of products: the rounding error grows with the terms'
    magnitudes (`magnitude`: the same computation on the inputs' absolute values), terms * eps of
    them, not with the result, which cancellation can make small beside them."""
    return terms * torch.finfo(dtype).eps * float(magnitude.abs().max())


# ---- statistical checks (random numbers: distributions, never exact streams) -------------------------


def assert_mean_near(x, mean, sd, what):
    """The sample mean of x is within six standard errors of `mean` (sd: the distribution's)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    err = abs(x.mean() - mean) / (sd / np.sqrt(x.size))
    assert err < 6, f"{what}: mean {x.mean():.5f}, expected {mean:.5f} ({err:.1f} standard errors off)"


def assert_frequencies(counts, probs, what):
    """Each category's count is within six standard errors of n * p (never seen where p is 0)."""
    counts, probs = np.asarray(counts, dtype=np.float64), np.asarray(probs, dtype=np.float64)
    n = counts.sum()
    sd = np.sqrt(n * probs * (1 - probs)) + 1e-9
    z = np.abs(counts - n * probs) / sd
    assert (z < 6).all() and (counts[probs == 0] == 0).all(), f"{what}: counts {counts}, expected {n * probs}"


def raises_like(torch_fn, flow_fn):
    """Runs both; if torch raises, flow must raise a compatible exception (returns True)."""
    try:
        torch_fn()
    except Exception as e:  # noqa: BLE001
        kind = (TypeError,) if isinstance(e, TypeError) else (RuntimeError, TypeError, IndexError)
        if isinstance(e, IndexError):
            kind = (IndexError,)
        if isinstance(e, ValueError):
            kind = (ValueError,)
        with pytest.raises(kind):
            flow_fn()
        return True
    return False


def kernel_lookups():
    """How many kernels the process has looked up (memory and disk hits, misses): unchanged across
    a call that ran no generated kernel."""
    st = flow._C.cache_stats()
    return st["memory_hits"] + st["disk_hits"] + st["misses"]
