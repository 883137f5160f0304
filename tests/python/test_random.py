"""flow.Generator and random sampling (python/flow/_random.py, _sampling.py): generators replay
their streams; every sampler follows torch's distribution (moments and frequencies within six
standard errors, on fresh seeds) eagerly and under flow.jit, where each call draws new numbers;
bad arguments raise as torch does. flow's numbers are never torch's exact stream, so values are
compared as distributions, not element by element."""
import math

import numpy as np
import pytest
import torch

import flow
from conftest import assert_frequencies, assert_mean_near, raises_like

N = 200_000
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]


def _np(t):
    return t.cpu().float().numpy().astype(np.float64) if t.dtype is not flow.float64 else t.cpu().numpy()






SEEDED_SCRIPT = """
import json, sys, flow
if sys.argv[1] == "dropout first":
    flow.nn.functional.dropout(flow.ones(64), 0.5)  # creates the in-graph counter
    flow.jit(lambda t: flow.nn.functional.dropout(t, 0.5))(flow.ones(64))
flow.manual_seed(1234)
w = flow.nn.Linear(8, 4).weight
mask = flow.jit(lambda t: flow.nn.functional.dropout(t, 0.5))(flow.ones(64))
print(json.dumps({"w": w.numpy().tolist(), "mask": mask.numpy().tolist()}))
"""


def test_manual_seed_replays_whatever_ran_before():
    """The same seed gives the same weights and the same compiled dropout mask in a fresh process
    and in one that had used dropout (manual_seed once drew the in-graph counters from the default
    generator, shifting its stream by one draw in the second process)."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "..", "python"),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = []
    for first in ("fresh", "dropout first"):
        r = subprocess.run([sys.executable, "-c", SEEDED_SCRIPT, first], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert out[0]["w"] == out[1]["w"]
    assert out[0]["mask"] == out[1]["mask"]


def test_generators_replay_and_are_independent():
    g = flow.Generator()
    assert g.manual_seed(1234) is g and g.initial_seed() == 1234
    a = [flow.rand(5, generator=g), flow.randn(5, generator=g), flow.randint(0, 100, (5,), generator=g),
         flow.randperm(7, generator=g), flow.empty(4).normal_(generator=g)]
    g.manual_seed(1234)
    b = [flow.rand(5, generator=g), flow.randn(5, generator=g), flow.randint(0, 100, (5,), generator=g),
         flow.randperm(7, generator=g), flow.empty(4).normal_(generator=g)]
    for x, y in zip(a, b):
        assert flow.equal(x, y)
    state = g.get_state()
    assert state.dtype is flow.uint8 and state.ndim == 1  # as torch's
    c = flow.rand(6, generator=g)
    flow.rand(100)  # the default generator is another stream
    g.set_state(state)
    assert flow.equal(flow.rand(6, generator=g), c)
    saved = flow.get_rng_state()
    e = flow.randn(4)
    flow.set_rng_state(saved)
    assert flow.equal(flow.randn(4), e)
    with pytest.raises(RuntimeError, match="not a state written by flow"):
        g.set_state(flow.tensor(torch.get_rng_state()))  # torch's bytes are another encoding
    with pytest.raises(TypeError, match="uint8 tensor"):
        g.set_state({"bit_generator": "PCG64"})
    assert flow.manual_seed(99) is flow.default_generator and flow.initial_seed() == 99
    d = flow.rand(8)
    flow.manual_seed(99)
    assert flow.equal(flow.rand(8), d)
    assert not flow.equal(flow.rand(8, generator=flow.Generator().manual_seed(1)),
                          flow.rand(8, generator=flow.Generator().manual_seed(2)))
    s = flow.seed()
    assert flow.initial_seed() == s
    with pytest.raises(TypeError, match="flow.Generator"):
        flow.rand(3, generator=np.random.default_rng())


@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16, flow.float32], ids=str)
def test_rand_never_draws_one(dtype):
    """rand is [0, 1) in every dtype: a float64 draw rounded to float16 reaches 1.0 about once in
    2^12 draws, so 2^20 of them would show it."""
    u = flow.rand(1 << 20, dtype=dtype).to(flow.float32).numpy()
    assert u.min() >= 0 and u.max() < 1, u.max()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_creation_distributions(device, jit):
    def draw():
        return (flow.rand(N, device=device), flow.randn(N, device=device), flow.randint(-3, 4, (N,), device=device),
                flow.randperm(1000, device=device), flow.rand(N, dtype=flow.float64, device=device),
                flow.randn(N // 4, dtype=flow.float16, device=device))

    f = flow.jit(lambda x: tuple(t + x * 0 if t.dtype is x.dtype else t for t in draw())) if jit else None
    u, z, k, perm, u64, zh = f(flow.zeros((), device=device)) if jit else draw()
    assert u.device.type == device and u.dtype is flow.float32 and k.dtype is flow.int64 and zh.dtype is flow.float16
    u_np, z_np, k_np = _np(u), _np(z), k.cpu().numpy()
    assert u_np.min() >= 0 and u_np.max() < 1
    assert_mean_near(u_np, 0.5, math.sqrt(1 / 12), "rand")
    assert_mean_near(u_np ** 2, 1 / 3, math.sqrt(4 / 45), "rand second moment")
    assert_mean_near(z_np, 0.0, 1.0, "randn")
    assert_mean_near(z_np ** 2, 1.0, math.sqrt(2.0), "randn variance")
    assert_mean_near(_np(zh) ** 2, 1.0, math.sqrt(2.0), "randn float16 variance")
    assert_frequencies(np.bincount(k_np + 3, minlength=7), [1 / 7] * 7, "randint")
    assert sorted(perm.cpu().tolist()) == list(range(1000)) and perm.cpu().tolist() != list(range(1000))
    assert (_np(u64) < 1).all() and (_np(u64) >= 0).all()
    if jit:  # a compiled function draws new numbers on every call
        again = f(flow.zeros((), device=device))
        assert not flow.equal(again[0], u) and not flow.equal(again[3], perm)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_samplers(device, jit):
    mean = flow.tensor([[-2.0], [3.0]], device=device)
    probs = flow.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]], device=device)

    # multinomial under jit is a Gumbel argmax over [samples, categories]: fewer samples on a device
    # keep the emulated one (tools/emulated_gpu_pytest.sh) quick; the bounds scale with the count.
    samples = N // 4 if device == "cpu" else N // 32

    def draw(m, p):
        return (flow.normal(m.expand(2, N // 2), 0.5),
                flow.normal(1.0, flow.full((N,), 2.0, device=device)),
                flow.bernoulli(flow.full((N,), 0.3, device=device)),
                flow.multinomial(p, samples, replacement=True),
                flow.multinomial(p, 3))

    args = (mean, probs)
    n2, n1, b, mr, mw = flow.jit(draw)(*args) if jit else draw(*args)
    n2_np = _np(n2)
    assert_mean_near(n2_np[0], -2.0, 0.5, "normal row 0")
    assert_mean_near(n2_np[1], 3.0, 0.5, "normal row 1")
    assert_mean_near((n2_np[1] - 3.0) ** 2, 0.25, 0.25 * math.sqrt(2), "normal variance")
    assert_mean_near(_np(n1), 1.0, 2.0, "normal(float, tensor)")
    assert b.dtype is flow.float32 and set(np.unique(_np(b))) <= {0.0, 1.0}
    assert_mean_near(_np(b), 0.3, math.sqrt(0.21), "bernoulli")
    mr_np = mr.cpu().numpy()
    assert mr.shape == (2, samples) and mr.dtype is flow.int64
    assert_frequencies(np.bincount(mr_np[0], minlength=4), [0.1, 0.0, 0.6, 0.3], "multinomial row 0")
    assert_frequencies(np.bincount(mr_np[1], minlength=4), [0.25] * 4, "multinomial row 1")
    mw_np = mw.cpu().numpy()
    assert mw.shape == (2, 3) and all(len(set(r)) == 3 for r in mw_np.tolist()) and 1 not in mw_np[0]
    if not jit:  # with too few non-zero weights, torch draws the zero-weight categories last
        few = flow.multinomial(flow.tensor([0.0, 2.0, 0.0, 1.0], device=device), 4).cpu().tolist()
        assert sorted(few[:2]) == [1, 3] and sorted(few[2:]) == [0, 2]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_multinomial_without_replacement_follows_the_sequential_draw(jit):
    """First draw ~ p; second ~ p renormalized without the first (checked on the first draw and on
    the pairs' frequencies)."""
    p = np.array([0.5, 0.3, 0.2])
    rows = flow.tensor(np.tile(p, (30_000, 1)).astype(np.float32))
    s = (flow.jit(lambda r: flow.multinomial(r, 2)) if jit else lambda r: flow.multinomial(r, 2))(rows).numpy()
    assert_frequencies(np.bincount(s[:, 0], minlength=3), p, "first draw")
    pair = np.zeros((3, 3))
    for i, j in s:
        pair[i, j] += 1
    expected = np.array([[0 if i == j else p[i] * p[j] / (1 - p[i]) for j in range(3)] for i in range(3)])
    assert_frequencies(pair.ravel(), expected.ravel(), "pairs")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_inplace_fills(device, jit):
    def fill(x):
        return (x.clone().uniform_(-2.0, 4.0), x.clone().normal_(1.0, 3.0), x.clone().bernoulli_(0.8),
                x.clone().exponential_(2.0), x.clone().log_normal_(0.0, 0.5), x.clone().cauchy_(1.0, 2.0),
                x.clone().geometric_(0.25), x.clone().random_(5), x.clone().random_(-2, 3))

    x = flow.zeros(N, device=device)
    u, n, b, e, ln, c, g, r5, r23 = flow.jit(fill)(x) if jit else fill(x)
    u, n, b, e, ln, c, g, r5, r23 = (_np(t) for t in (u, n, b, e, ln, c, g, r5, r23))
    assert u.min() >= -2 and u.max() < 4
    assert_mean_near(u, 1.0, 6 / math.sqrt(12), "uniform_")
    assert_mean_near(n, 1.0, 3.0, "normal_")
    assert_mean_near(b, 0.8, 0.4, "bernoulli_")
    assert e.min() >= 0
    assert_mean_near(e, 0.5, 0.5, "exponential_")
    assert_mean_near(np.log(ln), 0.0, 0.5, "log_normal_ (log)")
    assert_mean_near(c < 1.0, 0.5, 0.5, "cauchy_ median")
    assert_mean_near(np.abs(c - 1.0) < 2.0, 0.5, 0.5, "cauchy_ quartiles")
    assert g.min() >= 1 and (g == np.round(g)).all()
    assert_mean_near(g, 4.0, math.sqrt(0.75) / 0.25, "geometric_")
    assert_frequencies(np.bincount(r5.astype(np.int64), minlength=5), [0.2] * 5, "random_(5)")
    assert_frequencies(np.bincount(r23.astype(np.int64) + 2, minlength=5), [0.2] * 5, "random_(-2, 3)")
    assert x.eq(0).all().item()  # the clones were written, not x


def test_fills_keep_dtype_and_write_in_place():
    for dt in (flow.float16, flow.bfloat16, flow.float64):
        t = flow.zeros(1000, dtype=dt)
        storage = t.data_ptr()
        assert t.uniform_(2.0, 3.0) is t and t.data_ptr() == storage and t.dtype is dt
        assert (_np(t) >= 2).all() and (_np(t) <= 3).all()
    i = flow.zeros(10000, dtype=flow.int32).random_()
    assert i.dtype is flow.int32 and i.min().item() >= 0 and i.max().item() > 2 ** 28
    h = flow.zeros(10000, dtype=flow.float16).random_()
    assert h.max().item() <= 2 ** 11 and h.max().item() > 1000
    m = flow.zeros(6, 4)
    m[:, 1].normal_()
    assert m[:, 0].eq(0).all().item() and not m[:, 1].eq(0).all().item()


def test_generator_under_jit_is_refused():
    g = flow.Generator().manual_seed(0)
    with pytest.raises(flow.TraceError, match="generator"):
        flow.jit(lambda x: x + flow.rand(3, generator=g))(flow.zeros(3))


def test_bad_arguments_raise_like_torch():
    cases = [
        (lambda m: m.randint(5, 5, (3,)), "randint empty range"),
        (lambda m: m.rand(3, dtype=m.int64), "rand int"),
        (lambda m: m.randn(3, dtype=m.int32), "randn int"),
        (lambda m: m.randperm(-1), "randperm negative"),
        (lambda m: m.normal(m.zeros(3), -1.0), "normal negative std"),
        (lambda m: m.normal(0.0, 1.0), "normal without size"),
        (lambda m: m.bernoulli(m.full((3,), 1.5)), "bernoulli p > 1"),
        (lambda m: m.multinomial(m.ones(2, 2, 2), 1), "multinomial 3-d"),
        (lambda m: m.multinomial(m.tensor([1.0, -1.0]), 1), "multinomial negative"),
        (lambda m: m.multinomial(m.zeros(3), 1), "multinomial zero sum"),
        (lambda m: m.multinomial(m.ones(3), 4), "multinomial too many"),
        (lambda m: m.multinomial(m.ones(3), 0), "multinomial zero samples"),
        (lambda m: m.zeros(3).uniform_(2.0, 1.0), "uniform_ from > to"),
        (lambda m: m.zeros(3).normal_(0.0, -1.0), "normal_ negative std"),
        (lambda m: m.zeros(3).exponential_(-1.0), "exponential_ negative"),
        (lambda m: m.zeros(3).bernoulli_(2.0), "bernoulli_ p > 1"),
        (lambda m: m.zeros(3).geometric_(1.5), "geometric_ p"),
        (lambda m: m.zeros(3).random_(3, 3), "random_ empty range"),
        (lambda m: m.zeros(3, dtype=m.int64).normal_(), "normal_ int"),
    ]
    for fn, what in cases:
        assert raises_like(lambda: fn(torch), lambda: fn(flow)), f"torch accepts {what}"
