"""flow.nn against torch.nn: every layer built with the same arguments, loaded from the torch layer's
state_dict (keys, order and shapes must match) and run on the same random input, eagerly and under
@flow.jit; the functional ops (pooling, interpolate, pad, attention, losses); Module bookkeeping
(state_dict / load_state_dict, hooks, apply, train/eval, containers); nn.init's fan and gain rules.
"""
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn.functional as F
from flow import _eager_fusion
from conftest import FLOW_OF, assert_same, make, raises_like, to_flow, to_torch

RTOL, ATOL = 2e-5, 2e-5


def close(actual, expected, rtol=RTOL, atol=ATOL, msg=""):
    a = to_torch(actual) if isinstance(actual, flow.Tensor) else actual
    assert tuple(a.shape) == tuple(expected.shape), f"{msg}: shape {tuple(a.shape)} != {tuple(expected.shape)}"
    torch.testing.assert_close(a, expected.detach(), rtol=rtol, atol=atol, equal_nan=True,
                               msg=lambda m: f"{msg}: {m}")


def twin(name, *args, **kwargs):
    """(torch module, flow module) built with the same arguments, flow loaded from torch's state."""
    tm = getattr(torch.nn, name)(*args, **kwargs)
    fm = getattr(flow.nn, name)(*args, **kwargs)
    tsd = tm.state_dict()
    assert list(fm.state_dict()) == list(tsd), f"{name}: state_dict keys differ"
    for k, v in fm.state_dict().items():
        assert tuple(v.shape) == tuple(tsd[k].shape), f"{name}.{k}: shape {tuple(v.shape)} != {tuple(tsd[k].shape)}"
    assert sum(p.numel() for p in fm.parameters()) == sum(p.numel() for p in tm.parameters())
    fm.load_state_dict(tsd)
    return tm, fm


def run_both(tm, fm, inputs, jit=True, rtol=RTOL, atol=ATOL, msg="", **kw):
    """Runs torch and flow (eager, and @flow.jit when `jit`) on the same inputs and compares."""
    with torch.no_grad():
        expected = tm(*inputs, **kw)
    finputs = [to_flow(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    fkw = {k: to_flow(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    outs = [("eager", fm(*finputs, **fkw))]
    if jit:
        j = flow.jit(fm)
        outs.append(("jit", j(*finputs, **fkw)))
    for mode, out in outs:
        if isinstance(expected, tuple):
            for i, (a, e) in enumerate(zip(out, expected)):
                if e is None:
                    assert a is None, f"{msg} {mode} output {i}: expected None"
                else:
                    close(a, e, rtol, atol, f"{msg} {mode} output {i}")
        else:
            close(out, expected, rtol, atol, f"{msg} {mode}")
    return expected


# ---- layers vs torch ------------------------------------------------------------------------------------

LAYER_CASES = [
    ("Linear", (8, 5), {}, (3, 8)),
    ("Linear", (8, 5), {"bias": False}, (2, 4, 8)),
    ("Conv2d", (3, 8, 3), {}, (2, 3, 9, 10)),
    ("Conv2d", (3, 8, 3), {"stride": 2, "padding": 1}, (1, 3, 11, 8)),
    ("Conv2d", (4, 6, (3, 5)), {"stride": (2, 1), "padding": (1, 2), "bias": False}, (2, 4, 9, 9)),
    ("Conv2d", (4, 6, 3), {"padding": "same", "dilation": 2}, (1, 4, 8, 7)),
    ("Conv2d", (4, 6, 4), {"padding": "same"}, (1, 4, 8, 7)),
    ("Conv2d", (4, 6, 3), {"padding": "valid", "groups": 2}, (2, 4, 7, 7)),
    ("Conv2d", (6, 6, 3), {"padding": 1, "groups": 6}, (1, 6, 8, 8)),
    ("Conv2d", (3, 4, 3), {"padding": 2, "padding_mode": "reflect"}, (1, 3, 7, 6)),
    ("Conv2d", (3, 4, 3), {"padding": 1, "padding_mode": "replicate"}, (1, 3, 7, 6)),
    ("Conv2d", (3, 4, 3), {"padding": 1, "padding_mode": "circular"}, (1, 3, 7, 6)),
    ("Conv1d", (4, 6, 3), {"stride": 2, "padding": 1}, (2, 4, 15)),
    ("Conv1d", (4, 6, 5), {"padding": "same", "groups": 2, "dilation": 2}, (2, 4, 12)),
    ("Conv1d", (4, 6, 3), {"bias": False}, (4, 10)),
    ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 4, 5, 6)),
    ("ConvTranspose2d", (4, 6, 3), {"groups": 2, "dilation": 2, "bias": False}, (1, 4, 5, 5)),
    ("ConvTranspose2d", (3, 5, (2, 4)), {"stride": (2, 3)}, (1, 3, 4, 5)),
    ("BatchNorm1d", (6,), {}, (5, 6)),
    ("BatchNorm1d", (6,), {"affine": False}, (4, 6, 7)),
    ("BatchNorm2d", (5,), {"eps": 1e-3}, (2, 5, 4, 6)),
    ("LayerNorm", (8,), {}, (3, 5, 8)),
    ("LayerNorm", ((4, 8),), {"eps": 1e-6}, (2, 4, 8)),
    ("LayerNorm", (8,), {"elementwise_affine": False}, (3, 8)),
    ("LayerNorm", (8,), {"bias": False}, (3, 8)),
    ("GroupNorm", (2, 6), {}, (2, 6, 5, 5)),
    ("GroupNorm", (3, 6), {"affine": False, "eps": 1e-4}, (2, 6, 9)),
    ("RMSNorm", (8,), {}, (3, 8)),
    ("MaxPool2d", (3, 2, 1), {}, (2, 3, 11, 10)),
    ("MaxPool2d", (2,), {}, (1, 2, 8, 9)),
    ("MaxPool2d", (3,), {"stride": 2, "ceil_mode": True}, (1, 2, 10, 9)),
    ("MaxPool2d", ((2, 3),), {"stride": 1, "padding": (1, 1), "dilation": 2}, (1, 2, 9, 9)),
    ("AvgPool2d", (3, 2, 1), {}, (2, 3, 11, 10)),
    ("AvgPool2d", (3, 2, 1), {"count_include_pad": False}, (1, 3, 8, 7)),
    ("AvgPool2d", (3, 2, 1), {"ceil_mode": True}, (1, 3, 8, 7)),
    ("AvgPool2d", (2,), {"divisor_override": 3}, (1, 3, 8, 6)),
    ("AvgPool2d", (3, 2), {"ceil_mode": True, "count_include_pad": False}, (1, 2, 10, 9)),
    ("MaxPool1d", (3, 2, 1), {}, (2, 3, 11)),
    ("AvgPool1d", (4, 2), {}, (2, 3, 12)),
    ("AdaptiveAvgPool2d", ((1, 1),), {}, (2, 4, 7, 5)),
    ("AdaptiveAvgPool2d", (1,), {}, (4, 7, 5)),
    ("AdaptiveAvgPool2d", ((2, 3),), {}, (1, 3, 8, 9)),
    ("AdaptiveAvgPool2d", (3,), {}, (1, 3, 7, 5)),
    ("AdaptiveAvgPool2d", ((None, 2),), {}, (1, 3, 5, 6)),
    ("AdaptiveMaxPool2d", ((3, 2),), {}, (1, 3, 7, 5)),
    ("Flatten", (), {}, (2, 3, 4, 5)),
    ("Flatten", (0, 2), {}, (2, 3, 4, 5)),
    ("Unflatten", (1, (3, 4)), {}, (2, 12, 5)),
    ("Identity", (), {}, (3, 4)),
    ("Dropout", (0.3,), {}, (3, 4)),
]

ACTIVATION_CASES = [
    ("ReLU", (), {}), ("ReLU6", (), {}), ("GELU", (), {}), ("GELU", (), {"approximate": "tanh"}), ("SiLU", (), {}),
    ("Sigmoid", (), {}), ("Tanh", (), {}), ("Hardswish", (), {}), ("Hardsigmoid", (), {}),
    ("Hardtanh", (-0.5, 2.0), {}), ("LeakyReLU", (), {}), ("LeakyReLU", (0.2,), {}), ("ELU", (), {"alpha": 0.7}),
    ("Softplus", (), {"beta": 2.0, "threshold": 5.0}), ("Mish", (), {}), ("Softmax", (), {"dim": 1}),
    ("Softmax", (-1,), {}), ("LogSoftmax", (), {"dim": 0}),
]


@pytest.mark.parametrize("name,args,kwargs,shape", LAYER_CASES, ids=lambda v: str(v) if isinstance(v, str) else None)
def test_layer_eval(gen, name, args, kwargs, shape):
    tm, fm = twin(name, *args, **kwargs)
    tm.eval()
    fm.eval()
    if name.startswith("BatchNorm"):  # non-trivial running stats
        c = args[0]
        stats = {"running_mean": torch.randn(c, generator=gen), "running_var": torch.rand(c, generator=gen) + 0.5}
        if kwargs.get("affine", True):
            stats.update(weight=torch.randn(c, generator=gen), bias=torch.randn(c, generator=gen))
        tm.load_state_dict(stats, strict=False)
        fm.load_state_dict(stats, strict=False)
    x = make(shape, torch.float32, gen)
    run_both(tm, fm, [x], msg=f"{name}{args}{kwargs}")


@pytest.mark.parametrize("name,args,kwargs", ACTIVATION_CASES, ids=lambda v: str(v) if isinstance(v, str) else None)
def test_activation(gen, name, args, kwargs):
    tm, fm = twin(name, *args, **kwargs)
    x = make((3, 4, 5), torch.float32, gen) * 3
    run_both(tm, fm, [x], msg=f"{name}{args}{kwargs}")
    assert type(fm).__name__ == name and repr(fm).startswith(name)


@pytest.mark.parametrize("name,c,shape,kwargs", [
    ("BatchNorm2d", 4, (3, 4, 5, 6), {}),
    ("BatchNorm2d", 4, (2, 4, 3, 3), {"momentum": None}),
    ("BatchNorm2d", 4, (2, 4, 3, 3), {"momentum": 0.3, "affine": False}),
    ("BatchNorm1d", 6, (8, 6), {}),
    ("BatchNorm1d", 6, (4, 6, 5), {"eps": 1e-3}),
    ("BatchNorm2d", 4, (2, 4, 3, 3), {"track_running_stats": False}),
])
def test_batchnorm_train(gen, name, c, shape, kwargs):
    """Training mode normalizes with batch statistics and updates running_mean / running_var (unbiased)
    / num_batches_tracked like torch, over several steps."""
    tm, fm = twin(name, c, **kwargs)
    tm.train()
    fm.train()
    for step in range(3):
        x = make(shape, torch.float32, gen) + step
        with torch.no_grad():
            expected = tm(x)
        close(fm(to_flow(x)), expected, msg=f"step {step}")
        for k, v in tm.state_dict().items():
            close(fm.state_dict()[k], v, msg=f"step {step} {k}")
    fm.eval()
    tm.eval()
    x = make(shape, torch.float32, gen)
    with torch.no_grad():
        close(fm(to_flow(x)), tm(x), msg="eval after training")


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_train_under_jit_updates_running_stats(gen, momentum):
    tm, fm = twin("BatchNorm2d", 3, momentum=momentum)
    tm.train()
    jm = flow.jit(fm.train())
    for step in range(3):
        x = make((2, 3, 4, 4), torch.float32, gen)
        with torch.no_grad():
            ref = tm(x)
        np.testing.assert_allclose(jm(to_flow(x)).numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
        for name, buf in tm.named_buffers():
            np.testing.assert_allclose(getattr(fm, name).numpy(), buf.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {step} {name}")
    assert jm.num_traces == 1


def test_batchnorm_train_without_running_stats(gen):
    # Without running stats training mode traces fine (batch statistics only).
    tm, fm = twin("BatchNorm2d", 3, track_running_stats=False)
    run_both(tm.train(), fm.train(), [make((2, 3, 4, 4), torch.float32, gen)])


def test_batchnorm_input_dims():
    with pytest.raises(ValueError, match="expected 4D input"):
        flow.nn.BatchNorm2d(3)(flow.randn(2, 3, 4))


def test_dropout_modes():
    x = flow.randn(4, 5)
    d = flow.nn.Dropout(0.5)
    assert d.eval()(x) is x
    assert flow.nn.Dropout(0.0)(x) is x
    assert F.dropout(x, 0.2, training=False) is x
    assert (F.dropout(x, 1.0).numpy() == 0).all()
    with pytest.raises(ValueError):
        flow.nn.Dropout(1.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        F.dropout(flow.ones(3, dtype=flow.int64), 0.5)


def test_counter_generator_is_uniform_and_independent():
    from flow._creation import counter_rand

    u = counter_rand((1 << 20,)).numpy().astype(np.float64)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 3e-3 and abs(u.var() - 1 / 12) < 3e-3
    hist, _ = np.histogram(u, bins=32, range=(0, 1))
    expected = len(u) / 32
    chi2 = ((hist - expected) ** 2 / expected).sum()
    assert chi2 < 80, chi2  # 31 degrees of freedom: p < 1e-6 beyond 80
    for lag in (1, 7, 1024):
        assert abs(np.corrcoef(u[:-lag], u[lag:])[0, 1]) < 5e-3, lag
    v = counter_rand((1 << 20,)).numpy().astype(np.float64)  # the next draw: another stream
    assert abs(np.corrcoef(u, v)[0, 1]) < 5e-3 and (u == v).mean() < 1e-3
    # manual_seed makes draws reproducible.
    flow.manual_seed(123)
    a = counter_rand((1000,)).numpy()
    flow.manual_seed(123)
    np.testing.assert_array_equal(counter_rand((1000,)).numpy(), a)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dropout_train_mode_eager_and_jit(p, dtype, gen):
    n = 200_000
    x = flow.as_tensor(torch.rand(n, generator=gen) + 0.5).to(FLOW_OF[dtype])
    scale = torch.tensor(1.0 / (1.0 - p), dtype=dtype).item()
    jitted = flow.jit(lambda t: F.dropout(t, p))
    masks = []
    for fn in (lambda t: F.dropout(t, p), flow.nn.Dropout(p).train(), jitted, jitted):
        y = fn(x).float().numpy()
        xs = x.float().numpy()
        dropped = y == 0
        assert abs(dropped.mean() - p) < 5 * np.sqrt(p * (1 - p) / n), dropped.mean()
        kept_ref = torch.from_numpy(xs[~dropped]).to(dtype) * torch.tensor(scale, dtype=dtype)
        np.testing.assert_allclose(y[~dropped], kept_ref.float().numpy(), rtol=1e-2 if dtype != torch.float32 else 1e-6)
        masks.append(dropped)
    assert (masks[2] != masks[3]).mean() > 0.5 * 2 * p * (1 - p)  # each compiled call draws a new mask
    assert jitted.num_traces == 1


def test_dropout_fuses_with_its_input_under_jit():
    @flow.jit
    def f(x):
        return F.dropout(flow.relu(x) * 2.0, 0.25)

    y = f(flow.ones(1000))
    assert set(np.unique(y.numpy())) <= {0.0, np.float32(2.0 / 0.75)}
    # One kernel for relu, scale, mask and select (plus the generator counter's tiny increment).
    assert f.num_kernels == 2, f.explain(False)


def test_dropout_in_training_transformer_layer_under_jit(gen):
    layer = flow.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.2, batch_first=True).train()
    x = flow.as_tensor(torch.randn(2, 5, 16, generator=gen))
    j = flow.jit(layer)
    a, b = j(x).numpy(), j(x).numpy()
    assert np.isfinite(a).all() and not np.array_equal(a, b)
    layer.eval()
    np.testing.assert_allclose(j(x).numpy(), layer(x).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding(gen, padding_idx):
    tm, fm = twin("Embedding", 10, 6, padding_idx=padding_idx)
    assert fm.padding_idx == tm.padding_idx
    ids = torch.randint(0, 10, (3, 7), generator=gen)
    run_both(tm, fm, [ids])
    if padding_idx is not None:  # flow's own init zeroes the padding row too
        row = flow.nn.Embedding(10, 6, padding_idx=padding_idx).weight.numpy()[padding_idx]
        assert np.all(row == 0)


# ---- attention and transformer -------------------------------------------------------------------------


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("kind", ["self", "cross", "kvdim", "masks", "bias_kv", "unbatched"])
def test_multihead_attention(gen, batch_first, need_weights, kind):
    E, H, N, L, S = 16, 4, 2, 5, 7
    kw = {"batch_first": batch_first}
    if kind == "kvdim":
        kw.update(kdim=6, vdim=10)
    if kind == "bias_kv":
        kw.update(add_bias_kv=True, add_zero_attn=True)
    tm, fm = twin("MultiheadAttention", E, H, **kw)
    tm.eval()
    fm.eval()

    def seq(n, d=E):
        if kind == "unbatched":
            return make((n, d), torch.float32, gen)
        return make((N, n, d) if batch_first else (n, N, d), torch.float32, gen)

    extra = {"need_weights": need_weights}
    if kind == "self":
        q = seq(L)
        inputs = [q, q, q]
    elif kind == "kvdim":
        inputs = [seq(L), seq(S, 6), seq(S, 10)]
    else:
        inputs = [seq(L), seq(S), seq(S)]
    if kind == "masks":
        extra["attn_mask"] = torch.rand(L, S, generator=gen) < 0.3
        extra["attn_mask"][:, 0] = False  # every query attends somewhere
        extra["key_padding_mask"] = torch.zeros(N, S, dtype=torch.bool)
        extra["key_padding_mask"][0, -2:] = True
        extra["average_attn_weights"] = False
    if kind == "bias_kv":
        extra["attn_mask"] = torch.randn(N * H, L, S, generator=gen)
    with torch.no_grad():
        expected = tm(*inputs, **extra)
    fin = [to_flow(x) for x in inputs]
    if kind == "self":
        fin = [fin[0]] * 3
    fextra = {k: to_flow(v) if isinstance(v, torch.Tensor) else v for k, v in extra.items()}
    for mode, fn in (("eager", fm), ("jit", flow.jit(fm))):
        out, w = fn(*fin, **fextra)
        close(out, expected[0], 1e-4, 1e-5, f"{mode} output")
        if need_weights:
            close(w, expected[1], 1e-4, 1e-6, f"{mode} weights")
        else:
            assert w is None


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_encoder_layer(gen, norm_first, activation, batch_first):
    tm, fm = twin("TransformerEncoderLayer", 16, 4, dim_feedforward=32, dropout=0.1, activation=activation,
                  batch_first=batch_first, norm_first=norm_first)
    tm.eval()
    fm.eval()
    x = make((2, 6, 16) if batch_first else (6, 2, 16), torch.float32, gen)
    run_both(tm, fm, [x], rtol=1e-4, atol=1e-5)


def test_transformer_encoder_layer_masks(gen):
    tm, fm = twin("TransformerEncoderLayer", 16, 2, dim_feedforward=24, dropout=0.0, batch_first=True)
    tm.eval()
    fm.eval()
    x = make((2, 5, 16), torch.float32, gen)
    mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    run_both(tm, fm, [x], rtol=1e-4, atol=1e-5, src_mask=mask, src_key_padding_mask=kpm)


def test_transformer_encoder(gen):
    layer_t = torch.nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True, norm_first=True)
    layer_f = flow.nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True, norm_first=True)
    tm = torch.nn.TransformerEncoder(layer_t, 3, norm=torch.nn.LayerNorm(16), enable_nested_tensor=False).eval()
    fm = flow.nn.TransformerEncoder(layer_f, 3, norm=flow.nn.LayerNorm(16)).eval()
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict(tm.state_dict())
    assert fm.layers[0].linear1.weight.data_ptr() != fm.layers[1].linear1.weight.data_ptr()
    run_both(tm, fm, [make((2, 5, 16), torch.float32, gen)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["plain", "scale", "bool_mask", "float_mask", "causal", "gqa", "gqa_unbatched"])
def test_scaled_dot_product_attention(gen, case):
    q, k, v = (make((2, 3, n, 8), torch.float32, gen) for n in (5, 7, 7))
    kw = {}
    if case.startswith("gqa"):  # grouped-query attention: 6 query heads over 2 key and 3 value heads
        q, k, v = make((2, 6, 5, 8), torch.float32, gen), make((2, 2, 7, 8), torch.float32, gen), \
            make((2, 3, 7, 4), torch.float32, gen)
        if case == "gqa_unbatched":
            q, k, v = q[1], k[1], v[1]
        kw = {"enable_gqa": True, "is_causal": case == "gqa"}
    if case == "scale":
        kw["scale"] = 0.3
    elif case == "bool_mask":
        kw["attn_mask"] = torch.rand(5, 7, generator=gen) > 0.3
        kw["attn_mask"][:, 0] = True
    elif case == "float_mask":
        kw["attn_mask"] = torch.randn(2, 1, 5, 7, generator=gen)
    elif case == "causal":
        kw["is_causal"] = True
        k, v = k[:, :, :5], v[:, :, :5]
    expected = TF.scaled_dot_product_attention(q, k, v, **kw)
    fkw = {a: to_flow(b) if isinstance(b, torch.Tensor) else b for a, b in kw.items()}
    # float32 through two GEMMs and a softmax: differences of ~1e-6 absolute are rounding.
    close(F.scaled_dot_product_attention(to_flow(q), to_flow(k), to_flow(v), **fkw), expected, 1e-5, 1e-5)
    j = flow.jit(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **fkw))
    close(j(to_flow(q), to_flow(k), to_flow(v)), expected, 1e-5, 1e-5, "jit")


def test_grouped_query_attention_refusals(gen):
    q, k = make((1, 6, 4, 8), torch.float32, gen), make((1, 4, 4, 8), torch.float32, gen)
    for args in ((q, k, k), (q[0, 0], k[0, 0], k[0, 0])):  # 4 heads do not divide 6; 2-d has no head dim
        assert raises_like(lambda: TF.scaled_dot_product_attention(*args, enable_gqa=True),
                           lambda: F.scaled_dot_product_attention(*map(to_flow, args), enable_gqa=True))


# ---- functional: pad, interpolate, losses ----------------------------------------------------------------


@pytest.mark.parametrize("mode,pads,shape", [
    ("constant", (1, 2), (2, 3, 4)), ("constant", (1, 0, 2, 3), (2, 3, 4, 5)),
    ("reflect", (2, 1), (2, 3, 5)), ("reflect", (1, 2, 3, 1), (1, 2, 5, 6)),
    ("replicate", (3, 1, 0, 2), (1, 2, 4, 5)), ("circular", (2, 1, 1, 3), (1, 2, 4, 5)),
])
def test_pad(gen, mode, pads, shape):
    x = make(shape, torch.float32, gen)
    kw = {"value": 1.5} if mode == "constant" else {}
    expected = TF.pad(x, pads, mode=mode, **kw)
    close(F.pad(to_flow(x), pads, mode=mode, **kw), expected, 0, 0)
    close(flow.jit(lambda t: F.pad(t, pads, mode=mode, **kw))(to_flow(x)), expected, 0, 0, "jit")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads,shape", [
    ((1, 1), (1, 2, 4, 5)), ((1, 1), (5,)), ((1, 1, 1, 1), (2, 3, 4, 5, 6)), ((1, 1, 1, 1), (2, 3)),
    ((1, 1, 1, 1, 1, 1, 1, 1), (1, 2, 3, 4, 5)), ((1, 1), (2, 3)), ((1, 1, 1, 1), (2, 3, 4)),
    ((1, 1, 1, 1, 1, 1), (2, 3, 4, 5)), ((1, 1, 1, 1, 1, 1), (1, 2, 3, 4, 5)),
])
def test_pad_non_constant_ranks_follow_torch(gen, mode, pads, shape):
    # torch pads n dims of an (n+1)-D or (n+2)-D input in these modes; others are NotImplementedError.
    x = make(shape, torch.float32, gen)
    try:
        expected = TF.pad(x, pads, mode=mode)
    except NotImplementedError as e:
        with pytest.raises(NotImplementedError, match=f"Padding size {len(pads)} is not supported for"):
            F.pad(to_flow(x), pads, mode=mode)
        assert "Padding size" in str(e)
        return
    close(F.pad(to_flow(x), pads, mode=mode), expected, 0, 0)


@pytest.mark.parametrize("kw,shape", [
    ({"size": (7, 9), "mode": "nearest"}, (1, 2, 4, 5)),
    ({"scale_factor": 2, "mode": "nearest"}, (2, 3, 4, 5)),
    ({"scale_factor": 0.5, "mode": "nearest"}, (1, 2, 9, 8)),
    ({"size": (7, 3), "mode": "nearest-exact"}, (1, 2, 4, 5)),
    ({"size": (7, 9), "mode": "bilinear", "align_corners": False}, (1, 2, 4, 5)),
    ({"size": (7, 9), "mode": "bilinear", "align_corners": True}, (1, 2, 4, 5)),
    ({"scale_factor": 2, "mode": "bilinear"}, (2, 3, 4, 5)),
    ({"scale_factor": 1.7, "mode": "bilinear", "align_corners": True}, (1, 1, 5, 3)),
    ({"size": (3, 2), "mode": "bilinear"}, (1, 2, 8, 9)),
    ({"size": 11, "mode": "linear"}, (2, 3, 6)),
    ({"size": 4, "mode": "nearest"}, (2, 3, 6)),
])
def test_interpolate(gen, kw, shape):
    x = make(shape, torch.float32, gen)
    expected = TF.interpolate(x, **kw)
    close(F.interpolate(to_flow(x), **kw), expected, 1e-5, 1e-5)
    close(flow.jit(lambda t: F.interpolate(t, **kw))(to_flow(x)), expected, 1e-5, 1e-5, "jit")


@pytest.mark.parametrize("mode,shape", [("nearest", (1, 2, 5)), ("nearest", (1, 2, 3, 8)), ("nearest", (1, 1, 2, 3, 4)),
                                        ("linear", (1, 2, 4)), ("bilinear", (1, 2, 3, 2)), ("trilinear", (1, 1, 2, 3, 4)),
                                        ("bicubic", (1, 1, 3, 5))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_interpolate_by_scale_factors_keeping_or_doubling_a_size(gen, mode, shape, dtype):
    """torch copies an axis whose size the scale factor keeps (linear modes; 1-d and 2-d nearest,
    which also shift an axis it doubles) whatever the factor, where flow resampled it by 1 / factor;
    3-d nearest and bicubic use the factor. float64 resizes compute in float64, as torch's (flow's
    weights were float32: 3e-7 off)."""
    x = make(shape, dtype, gen)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for sf in itertools.product([1.0, 1.25, 0.5, 2.0, 2.3], repeat=len(shape) - 2):
        kw = {"scale_factor": sf, "mode": mode}
        expected = TF.interpolate(x, **kw)
        close(F.interpolate(to_flow(x), **kw), expected, tol, tol, f"{sf}")
        close(flow.jit(lambda t: F.interpolate(t, **kw))(to_flow(x)), expected, tol, tol, f"jit {sf}")


@pytest.mark.parametrize("sizes", [((256, 256), (224, 224)), ((224, 300), (256, 199))], ids=str)
def test_bilinear_resize_of_images_follows_torchs_float32_coordinates(gen, sizes):
    """An image resize (256 -> 224): source coordinates as far as 255 in float32, computed as
    torch's kernels do (a float64 ratio moved them by ~1e-5, 100x the tolerance below)."""
    (hi, wi), size = sizes
    x = torch.rand((2, 3, hi, wi), generator=gen) * 255
    for ac in (False, True):
        expected = TF.interpolate(x, size=size, mode="bilinear", align_corners=ac)
        close(F.interpolate(to_flow(x), size=size, mode="bilinear", align_corners=ac), expected, 1e-6, 1e-4)


@pytest.mark.parametrize("kw", [
    {"mode": "bicubic"}, {"mode": "bicubic", "align_corners": True}, {"mode": "bilinear", "antialias": True},
    {"mode": "bicubic", "antialias": True}, {"mode": "bilinear", "antialias": True, "align_corners": True},
    {"mode": "bicubic", "antialias": True, "align_corners": True},
], ids=str)
def test_bicubic_and_antialiased_resize(gen, kw):
    """torchvision's Resize (antialiased on tensors) and timm's bicubic: downscales (windows of up
    to 9 taps, shorter at the borders), upscales, one axis unchanged, odd and tiny sizes, by size
    and by scale factor; eagerly and under @flow.jit."""
    cases = [((2, 3, 256, 256), {"size": (224, 224)}), ((1, 2, 300, 200), {"size": (224, 224)}),
             ((1, 2, 17, 19), {"size": (5, 60)}), ((1, 1, 8, 8), {"size": (8, 3)}), ((1, 1, 5, 7), {"size": (1, 1)}),
             ((1, 2, 9, 11), {"scale_factor": 0.4}), ((1, 2, 6, 5), {"scale_factor": (2.5, 1.5)})]
    for shape, size in cases:
        x = torch.rand(shape, generator=gen)
        expected = TF.interpolate(x, **size, **kw)
        got = F.interpolate(to_flow(x), **size, **kw)
        close(got, expected, 1e-5, 1e-5, f"{shape} {size}")
        close(flow.jit(lambda t: F.interpolate(t, **size, **kw))(to_flow(x)), to_torch(got), 0, 0, "jit")


def test_eager_resize_runs_as_one_compiled_function(gen):
    """Eagerly, a resize (a gather, multiply and add per tap) runs as one compiled function
    (flow/_eager_fusion.py): repeated calls reuse its variant, new sizes add one each, and it keeps
    the last _MAX_VARIANTS."""
    x = to_flow(torch.rand((1, 2, 12, 10), generator=gen))
    F.interpolate(x, size=(5, 4), mode="bicubic", antialias=True)
    jitted = F.interpolate.jitted
    traces = jitted.num_traces
    flow.reset_launch_count()
    for _ in range(3):
        F.interpolate(x, size=(5, 4), mode="bicubic", antialias=True)
    assert jitted.num_traces == traces
    assert flow.launch_count() == 3 * 2  # one kernel per axis
    for k in range(80):
        close(F.interpolate(x, size=(3 + k, 4), mode="bilinear"),
              TF.interpolate(to_torch(x), size=(3 + k, 4), mode="bilinear"), 1e-5, 1e-5)
    assert len(jitted._variants) == _eager_fusion._MAX_VARIANTS


def test_antialiased_resize_keeps_infinities_where_torch_does(gen):
    """A window shorter than the filter's widest (at the borders) adds nothing for its missing taps,
    so an inf pixel gives inf or NaN exactly where torch's does, not NaN across the image."""
    x = torch.rand((1, 1, 40, 40), generator=gen)
    x[0, 0, 3, 0] = float("inf")
    x[0, 0, 20, 39] = float("nan")
    for mode in ("bilinear", "bicubic"):
        expected = TF.interpolate(x, size=(13, 11), mode=mode, antialias=True)
        close(F.interpolate(to_flow(x), size=(13, 11), mode=mode, antialias=True), expected, 1e-5, 1e-5, mode)


def test_interpolate_refusals():
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(flow.randn(1, 1, 4), scale_factor=2, mode="linear", antialias=True)
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(flow.randn(1, 1, 4, 4), scale_factor=2, mode="nearest", antialias=True)
    with pytest.raises(NotImplementedError, match="bicubic mode needs 4D input"):
        F.interpolate(flow.randn(1, 1, 4), scale_factor=2, mode="bicubic")
    with pytest.raises(NotImplementedError, match="'lanczos' is not supported"):
        F.interpolate(flow.randn(1, 1, 4, 4), scale_factor=2, mode="lanczos")


@pytest.mark.parametrize("kw", [
    {}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 1}, {"weight": True},
    {"weight": True, "ignore_index": 0, "reduction": "mean"}, {"label_smoothing": 0.1},
    {"label_smoothing": 0.2, "weight": True, "reduction": "sum"}, {"probs": True},
    {"probs": True, "label_smoothing": 0.1, "weight": True}, {"spatial": True},
])
def test_cross_entropy(gen, kw):
    kw = dict(kw)
    C = 5
    shape = (4, C, 3) if kw.pop("spatial", False) else (6, C)
    x = make(shape, torch.float32, gen)
    tshape = (shape[0],) + shape[2:]
    if kw.pop("probs", False):
        target = torch.softmax(make(shape, torch.float32, gen), 1)
    else:
        target = torch.randint(0, C, tshape, generator=gen)
    if kw.get("weight"):
        kw["weight"] = torch.rand(C, generator=gen) + 0.5
    expected = TF.cross_entropy(x, target, **kw)
    fkw = {a: to_flow(b) if isinstance(b, torch.Tensor) else b for a, b in kw.items()}
    close(F.cross_entropy(to_flow(x), to_flow(target), **fkw), expected, 1e-5, 1e-6)
    close(flow.jit(lambda a, b: F.cross_entropy(a, b, **fkw))(to_flow(x), to_flow(target)), expected, 1e-5, 1e-6,
          "jit")


def test_nll_and_simple_losses(gen):
    x = torch.log_softmax(make((5, 4), torch.float32, gen), 1)
    t = torch.randint(0, 4, (5,), generator=gen)
    close(F.nll_loss(to_flow(x), to_flow(t)), TF.nll_loss(x, t), 1e-5, 1e-6)
    a, b = make((3, 4), torch.float32, gen), make((3, 4), torch.float32, gen)
    close(F.mse_loss(to_flow(a), to_flow(b)), TF.mse_loss(a, b), 1e-5, 1e-6)
    close(F.l1_loss(to_flow(a), to_flow(b), reduction="sum"), TF.l1_loss(a, b, reduction="sum"), 1e-5, 1e-6)


def test_one_hot(gen):
    t = torch.randint(0, 6, (3, 4), generator=gen)
    close(F.one_hot(to_flow(t), 7), TF.one_hot(t, 7), 0, 0)
    close(F.one_hot(to_flow(t)), TF.one_hot(t), 0, 0)


@pytest.mark.parametrize("fn,kw,shape", [
    ("max_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1}, (1, 2, 9, 9)),
    ("avg_pool2d", {"kernel_size": 2}, (1, 2, 9, 9)),
    ("adaptive_avg_pool2d", {"output_size": (4, 3)}, (2, 3, 9, 7)),
    ("conv1d", {"weight": (6, 2, 3), "stride": 1, "padding": "same", "groups": 2}, (2, 4, 9)),
    ("layer_norm", {"normalized_shape": (6,)}, (2, 3, 6)),
    ("group_norm", {"num_groups": 2}, (2, 4, 3, 3)),
    ("leaky_relu", {"negative_slope": 0.3}, (4, 5)),
    ("hardtanh", {"min_val": -0.2, "max_val": 0.4}, (4, 5)),
])
def test_functional(gen, fn, kw, shape):
    x = make(shape, torch.float32, gen)
    tkw = {k: make(v, torch.float32, gen) if k == "weight" else v for k, v in kw.items()}
    fkw = {k: to_flow(v) if isinstance(v, torch.Tensor) else v for k, v in tkw.items()}
    close(getattr(F, fn)(to_flow(x), **fkw), getattr(TF, fn)(x, **tkw), 1e-5, 1e-5)


# ---- Module bookkeeping ---------------------------------------------------------------------------------


class Net(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = flow.nn.Linear(4, 3)
        self.bn = flow.nn.BatchNorm1d(3)
        self.blocks = flow.nn.ModuleList([flow.nn.Linear(3, 3) for _ in range(2)])
        self.heads = flow.nn.ModuleDict({"a": flow.nn.Linear(3, 2), "b": flow.nn.Identity()})
        self.register_buffer("scale", flow.ones(3))
        self.register_buffer("tmp", flow.zeros(2), persistent=False)
        self.register_parameter("extra", flow.nn.Parameter(flow.zeros(3)))

    def forward(self, x):
        x = self.bn(self.fc(x)) * self.scale + self.extra
        for b in self.blocks:
            x = flow.relu(b(x))
        return self.heads["a"](self.heads["b"](x))


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3)
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(2)])
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 2), "b": torch.nn.Identity()})
        self.register_buffer("scale", torch.ones(3))
        self.register_buffer("tmp", torch.zeros(2), persistent=False)
        self.register_parameter("extra", torch.nn.Parameter(torch.zeros(3)))

    def forward(self, x):
        x = self.bn(self.fc(x)) * self.scale + self.extra
        for b in self.blocks:
            x = torch.relu(b(x))
        return self.heads["a"](self.heads["b"](x))


def test_module_state_dict_and_traversal(gen):
    fm, tm = Net(), TorchNet()
    assert list(fm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in fm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in fm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in fm.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in fm.named_children()] == [n for n, _ in tm.named_children()]
    assert "tmp" not in fm.state_dict()
    with torch.no_grad():
        for p in tm.parameters():
            p.normal_(generator=gen)
        tm.bn.running_mean.normal_(generator=gen)
    r = fm.load_state_dict(tm.state_dict())
    assert r.missing_keys == [] and r.unexpected_keys == []
    tm.eval()
    fm.eval()
    x = make((5, 4), torch.float32, gen)
    with torch.no_grad():
        expected = tm(x)
    close(fm(to_flow(x)), expected, 1e-5, 1e-6)
    close(flow.jit(fm)(to_flow(x)), expected, 1e-5, 1e-6, "jit")
    # numpy values load too
    fm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    close(fm(to_flow(x)), expected, 1e-5, 1e-6, "numpy state")
    # and flow state dicts round-trip
    fm2 = Net().eval()
    fm2.load_state_dict(fm.state_dict())
    close(fm2(to_flow(x)), expected, 1e-5, 1e-6, "flow state")


def test_load_state_dict_strict():
    fm = Net()
    sd = dict(fm.state_dict())
    sd.pop("fc.bias")
    sd["bogus"] = np.zeros(3, np.float32)
    with pytest.raises(RuntimeError, match="Missing key.*fc.bias|Unexpected key.*bogus"):
        fm.load_state_dict(sd)
    r = fm.load_state_dict(sd, strict=False)
    assert r.missing_keys == ["fc.bias"] and r.unexpected_keys == ["bogus"]
    sd = dict(fm.state_dict())
    sd["fc.weight"] = np.zeros((2, 2), np.float32)
    with pytest.raises(RuntimeError, match="size mismatch for fc.weight"):
        fm.load_state_dict(sd)


def test_load_state_dict_keeps_jit_variant(gen):
    fm = flow.nn.Linear(4, 3)
    j = flow.jit(fm)
    x = flow.randn(2, 4)
    j(x)
    tm = torch.nn.Linear(4, 3)
    fm.load_state_dict(tm.state_dict())
    with torch.no_grad():
        close(j(x), tm(to_torch(x)), 1e-5, 1e-6)
    assert j.num_traces == 1


def test_train_eval_apply_hooks():
    fm = Net()
    assert fm.training and fm.bn.training
    fm.eval()
    assert not any(m.training for m in fm.modules())
    fm.train()
    assert all(m.training for m in fm.modules())
    seen = []
    fm.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 4

    calls = []
    h1 = fm.fc.register_forward_pre_hook(lambda m, args: calls.append(("pre", tuple(args[0].shape))))
    h2 = fm.fc.register_forward_hook(lambda m, args, out: out * 0.0)
    fm.eval()
    y = fm.fc(flow.randn(2, 4))
    assert calls == [("pre", (2, 4))] and np.all(y.numpy() == 0)
    h1.remove()
    h2.remove()
    y = fm.fc(flow.ones(2, 4))
    assert len(calls) == 1 and not np.all(y.numpy() == 0)


def test_containers():
    seq = flow.nn.Sequential(flow.nn.Linear(2, 3), flow.nn.ReLU(), flow.nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[1], flow.nn.ReLU) and isinstance(seq[-1], flow.nn.Linear)
    assert len(seq[:2]) == 2
    ml = flow.nn.ModuleList([flow.nn.ReLU()])
    ml.append(flow.nn.Tanh())
    ml.extend([flow.nn.Sigmoid()])
    ml.insert(0, flow.nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "ReLU", "Tanh", "Sigmoid"]
    md = flow.nn.ModuleDict({"a": flow.nn.ReLU()})
    md["b"] = flow.nn.Tanh()
    assert list(md.keys()) == ["a", "b"] and "b" in md and len(md) == 2
    with pytest.raises(TypeError):
        flow.nn.Module().register_buffer("x", np.zeros(3))
    with pytest.raises(TypeError):
        flow.nn.Module().register_parameter("x", flow.zeros(3))


def test_module_to_dtype():
    m = flow.nn.Sequential(flow.nn.Linear(3, 2), flow.nn.BatchNorm1d(2))
    m.to(flow.float64)
    assert m[0].weight.dtype is flow.float64 and isinstance(m[0].weight, flow.nn.Parameter)
    assert m[1].running_mean.dtype is flow.float64 and m[1].num_batches_tracked.dtype is flow.int64
    y = m.eval()(flow.randn(4, 3, dtype=flow.float64))
    assert y.dtype is flow.float64


# ---- nn.init ---------------------------------------------------------------------------------------------


def test_calculate_gain():
    for nl, p in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                  ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]:
        assert flow.nn.init.calculate_gain(nl, p) == pytest.approx(torch.nn.init.calculate_gain(nl, p))


@pytest.mark.parametrize("shape", [(64, 32), (32, 16, 3, 3), (16, 8, 5)])
def test_init_distributions(shape):
    """Bounds and standard deviations follow torch's fan computations."""
    flow.manual_seed(1)
    t = torch.empty(shape)
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(t)
    init = flow.nn.init
    x = flow.empty(*shape)

    def stats(fn, *a, **kw):
        fn(x, *a, **kw)
        v = x.numpy().astype(np.float64)
        return v.std(), np.abs(v).max(), v.mean()

    n = int(np.prod(shape))
    tol = 4 / math.sqrt(n)  # relative tolerance of a sample std
    std, mx, _ = stats(init.kaiming_normal_, mode="fan_out", nonlinearity="relu")
    assert std == pytest.approx(math.sqrt(2.0 / fan_out), rel=tol)
    std, mx, _ = stats(init.kaiming_uniform_, a=math.sqrt(5))
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 5)) / math.sqrt(fan_in)
    assert mx <= bound and mx > 0.9 * bound
    std, mx, _ = stats(init.xavier_uniform_, gain=2.0)
    bound = 2.0 * math.sqrt(6.0 / (fan_in + fan_out))
    assert mx <= bound and mx > 0.9 * bound
    std, _, _ = stats(init.xavier_normal_)
    assert std == pytest.approx(math.sqrt(2.0 / (fan_in + fan_out)), rel=tol)
    std, mx, mean = stats(init.trunc_normal_, std=0.5, a=-0.4, b=0.6)
    assert mx <= 0.6 and x.numpy().min() >= -0.4
    std, _, mean = stats(init.normal_, 1.0, 0.1)
    assert mean == pytest.approx(1.0, abs=0.05) and std == pytest.approx(0.1, rel=tol)
    _, mx, _ = stats(init.uniform_, -0.3, 0.3)
    assert mx <= 0.3
    init.constant_(x, 2.5)
    assert np.all(x.numpy() == 2.5)
    init.zeros_(x)
    assert np.all(x.numpy() == 0)
    init.ones_(x)
    assert np.all(x.numpy() == 1)
    with pytest.raises(ValueError):
        init.kaiming_normal_(flow.empty(5))


def test_default_init_matches_torch_scale():
    """Linear / Conv2d default init: kaiming_uniform(a=sqrt(5)) weight, bias in +-1/sqrt(fan_in)."""
    m = flow.nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)
    assert np.abs(m.weight.numpy()).max() <= bound and np.abs(m.bias.numpy()).max() <= bound
    assert np.abs(m.weight.numpy()).max() > 0.9 * bound


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                   torch.uint8, torch.int8, torch.int16, torch.int64], ids=str)
@pytest.mark.parametrize("kw", [
    {"kernel_size": 3, "stride": 2, "padding": 1},                  # unrolled window (ResNet's)
    {"kernel_size": (2, 3), "stride": (1, 2), "ceil_mode": True},
    {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 2},
    {"kernel_size": 5, "stride": 3, "padding": 2},                  # 25 > 16: separable (columns, then rows)
    {"kernel_size": (5, 4), "stride": 1, "padding": 2, "dilation": (1, 2), "ceil_mode": True},  # SPPF-like, dilated
    {"kernel_size": 1},
], ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_max_pool2d_paths_nan_and_layouts(gen, dtype, kw):
    shapes = [(2, 3, 11, 9), (3, 7, 8), (1, 1, 5, 5)]
    for shape in shapes:
        x = make(shape, dtype, gen, special=True)
        want = TF.max_pool2d(x, **kw)
        got = F.max_pool2d(to_flow(x), **kw)
        assert_same(got, want, msg=f"eager {shape}")
        jitted = flow.jit(lambda t: F.max_pool2d(t, **kw))
        assert_same(jitted(to_flow(x)), want, msg=f"jit {shape}")
    # A non-contiguous (channels-last) input.
    x = make((2, 4, 9, 10), dtype, gen, special=True).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    assert_same(F.max_pool2d(to_flow(x), **kw), TF.max_pool2d(x, **kw), msg="channels-last input")
    # Integers pad with their lowest value; bool is refused with torch's own error (torch has no
    # bool max pool kernel; its message names its channels-last kernel for such an input).
    refusal = "\"max_pool2d(_channels_last)?\" not implemented for 'Bool'"
    with pytest.raises(NotImplementedError, match=refusal):
        TF.max_pool2d(x > 0, **kw)
    with pytest.raises(NotImplementedError, match=refusal):
        F.max_pool2d(to_flow(x) > 0, **kw)


@pytest.mark.parametrize("kw, kernels", [
    ({"kernel_size": 3, "stride": 2, "padding": 1}, 1),                  # every tap one read of x
    ({"kernel_size": 5, "stride": 1, "padding": 2, "ceil_mode": True}, 2),  # separable: columns, rows
], ids=["3x3", "5x5"])
def test_max_pool2d_reads_its_input_without_a_padded_copy(gen, kw, kernels):
    """The window taps are pads of strided slices of the input (functional._pool_tap), so a padded
    pool is one kernel per pass, with no kernel writing a padded copy of the input first."""
    x = make((2, 8, 13, 12), torch.float32, gen, special=True)
    jitted = flow.jit(lambda t: F.max_pool2d(t, **kw))
    assert_same(jitted(to_flow(x)), TF.max_pool2d(x, **kw), msg=str(kw))
    assert jitted.num_kernels == kernels, jitted.explain(with_source=False)


@pytest.mark.parametrize("fn", ["max_pool", "pool_relu_add"])
def test_jit_keeps_a_channels_last_input_channels_last(gen, fn):
    """As torch's memory-format propagation: ops on a channels-last input run on its NHWC data
    (a pool's taps read channels innermost, no transposing read) and return channels-last."""
    def f(F, x, b):
        y = F.max_pool2d(x, 3, 2, 1)
        return y if fn == "max_pool" else F.relu(y) + b

    x = make((2, 5, 11, 9), torch.float32, gen, special=True).contiguous(memory_format=torch.channels_last)
    b = make((5, 1, 1), torch.float32, gen)
    want = f(TF, x, b)
    xf = to_flow(x).contiguous(memory_format=flow.channels_last)
    jitted = flow.jit(lambda t, c: f(F, t, c))
    got = jitted(xf, to_flow(b))
    assert_same(got, want, msg=fn)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    assert jitted.num_kernels == 1, jitted.explain(with_source=False)
    # A contiguous input stays contiguous.
    plain = flow.jit(lambda t, c: f(F, t, c))(to_flow(x.contiguous()), to_flow(b))
    assert plain.is_contiguous()


def test_jit_as_strided_of_a_channels_last_input_reads_its_memory(gen):
    """as_strided addresses the input's own (NHWC) memory, as torch's does, while ops beside it
    go channels-last (scheduler/channels_last.cpp leaves such an input unseeded)."""
    x = make((2, 3, 4, 5), torch.float32, gen).contiguous(memory_format=torch.channels_last)
    size, stride = (2, 3, 3, 5), (60, 20, 5, 1)

    def f(t):
        return t.relu() + 1, t.as_strided(size, stride), t[:, :, 1:].as_strided((1,) + size[1:], stride)

    got = flow.jit(f)(to_flow(x).contiguous(memory_format=flow.channels_last))
    for g, w in zip(got, f(x)):
        assert_same(g, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64],
                         ids=str)
@pytest.mark.parametrize("kw", [
    {"kernel_size": 2},                                                  # DenseNet's transition
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": (2, 3), "stride": (1, 2), "ceil_mode": True},       # partial last windows
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": 5, "stride": 3, "padding": 2},                      # 25 > 16: separable
    {"kernel_size": 3, "padding": 1, "divisor_override": 4},
    {"kernel_size": 1, "stride": 2},
], ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_avg_pool2d_paths_dtypes_and_layouts(gen, dtype, kw):
    """avg_pool2d as a sum of window taps: torch's divisors (padding counted or not, ceil_mode's
    partial windows, divisor_override), half types summed in float32, int64 divided truncating."""
    for shape in [(2, 3, 11, 9), (3, 7, 8), (1, 1, 5, 5)]:
        x = make(shape, dtype, gen, special=True)
        want = TF.avg_pool2d(x, **kw)
        assert_same(F.avg_pool2d(to_flow(x), **kw), want, msg=f"eager {shape}")
        jitted = flow.jit(lambda t: F.avg_pool2d(t, **kw))
        assert_same(jitted(to_flow(x)), want, msg=f"jit {shape}")
    x = make((2, 4, 9, 10), dtype, gen, special=True).contiguous(memory_format=torch.channels_last)
    assert_same(F.avg_pool2d(to_flow(x), **kw), TF.avg_pool2d(x, **kw), msg="channels-last input")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])])])
def test_avg_pool2d_of_int64_truncates_on_every_device(device, gen):
    """torch computes int64 average pools on the CPU only (truncating the sum's quotient); flow on
    CUDA too, with the CPU's result, as its integer matrix products."""
    x = make((2, 3, 9, 8), torch.int64, gen, low=-50, high=50)
    for kw in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}):
        want = TF.avg_pool2d(x, **kw)
        assert_same(F.avg_pool2d(to_flow(x).to(device), **kw).cpu(), want, msg=str(kw))
        assert_same(flow.jit(lambda t: F.avg_pool2d(t, **kw))(to_flow(x).to(device)).cpu(), want, msg=f"jit {kw}")


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.bool], ids=str)
def test_avg_pool2d_refuses_what_torch_refuses(dtype):
    x = torch.ones((1, 1, 4, 4), dtype=dtype)
    with pytest.raises(NotImplementedError) as want:
        TF.avg_pool2d(x, 2)
    with pytest.raises(NotImplementedError) as got:
        F.avg_pool2d(to_flow(x), 2)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("divisor", [0, 2.5, True])
def test_avg_pool2d_refuses_a_bad_divisor_override_as_torch(divisor):
    x = torch.ones((1, 1, 4, 4))
    with pytest.raises((TypeError, RuntimeError)) as want:
        TF.avg_pool2d(x, 2, divisor_override=divisor)
    with pytest.raises(want.type) as got:
        F.avg_pool2d(to_flow(x), 2, divisor_override=divisor)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1,
                                                     "count_include_pad": False}], ids=["2x2", "3x3-pad"])
def test_avg_pool2d_is_one_kernel_reading_its_input_in_place(gen, kw, channels_last):
    """The taps read the input where it lies (no padded copy, no contiguous copy of a channels-last
    input for a window view), summed and divided in one kernel; a channels-last input stays so."""
    x = make((2, 8, 13, 12), torch.float32, gen)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    jitted = flow.jit(lambda t: F.avg_pool2d(t, **kw))
    got = jitted(to_flow(x).contiguous(memory_format=flow.channels_last) if channels_last else to_flow(x))
    want = TF.avg_pool2d(x, **kw)
    assert_same(got, want)
    assert got.stride() == want.stride()
    assert jitted.num_kernels == 1, jitted.explain(with_source=False)


def test_max_pool2d_of_a_1x1_window_is_a_new_tensor(gen):
    """A 1x1 window with stride 2 reads a strided view of the input; the result is still a copy,
    as torch's (Detectron2's LastLevelMaxPool is such a pool)."""
    x = make((1, 2, 5, 5), torch.float32, gen)
    for pool in (lambda t: F.max_pool2d(t, 1, 2, 0), flow.jit(lambda t: F.max_pool2d(t, 1, 2, 0))):
        xf = to_flow(x)
        y = pool(xf)
        y.add_(1)
        assert_same(xf, x)
        assert_same(y, TF.max_pool2d(x, 1, 2, 0) + 1)


def _pool_cases():
    """(size, kernel, stride, padding, dilation) around the edges of torch's output-size formula:
    inputs shorter than the (dilated) window, the ceil_mode window that would start in the right
    padding, strides larger than the kernel."""
    for size in (1, 2, 5, 7, 19):
        for k, d in ((1, 1), (2, 1), (3, 1), (3, 2), (5, 3), (17, 2)):
            for s in (1, 2, 3, k + 2):
                for p in sorted({0, 1, k // 2}):
                    if p * 2 <= k:
                        yield size, k, s, p, d


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pool_output_sizes_and_errors_match_torch(gen, ceil_mode):
    """max_pool2d and avg_pool2d give torch's output size (and values) for every case torch
    accepts, and raise where torch raises."""
    checked = 0
    for size, k, s, p, d in _pool_cases():
        x = make((1, 2, size, 3), torch.float32, gen)
        pools = [("max", lambda f, t: f.max_pool2d(t, (k, 1), (s, 1), (p, 0), (d, 1), ceil_mode))]
        if d == 1:
            pools.append(("avg", lambda f, t: f.avg_pool2d(t, (k, 1), (s, 1), (p, 0), ceil_mode)))
        for name, pool in pools:
            case = f"{name} size={size} k={k} s={s} p={p} d={d} ceil_mode={ceil_mode}"
            try:
                want = pool(TF, x)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    pool(F, to_flow(x))
                continue
            assert_same(pool(F, to_flow(x)), want, msg=case)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("bad", [5, -1, 100])
def test_embedding_out_of_range_raises_like_torch(bad):
    tw = torch.randn(5, 3)
    idx = torch.tensor([[0, 4], [bad, 1]])
    with pytest.raises(IndexError) as te:
        TF.embedding(idx, tw)
    with pytest.raises(IndexError) as fe:
        F.embedding(to_flow(idx), to_flow(tw))
    assert str(fe.value) == str(te.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("fn", ["adaptive_avg_pool2d", "adaptive_max_pool2d"])
def test_adaptive_pools_of_unequal_windows_are_one_kernel_per_axis(fn, dtype, gen):
    """Windows of unequal lengths (9 -> 4 rows, 10 -> 3 columns): each axis gathers the windows'
    k-th elements and combines them elementwise, with an inf inside one window; eagerly and jitted."""
    x = make((2, 3, 9, 10), dtype, gen)
    x[0, 1, 4, 5] = float("inf")
    want = getattr(TF, fn)(x, (4, 3))
    jitted = flow.jit(lambda t: getattr(F, fn)(t, (4, 3)))
    tol = (1e-2, 1e-2) if dtype in (torch.float16, torch.bfloat16) else (1e-5, 1e-6)
    assert_same(getattr(F, fn)(to_flow(x), (4, 3)), want, *tol, msg="eager")
    assert_same(jitted(to_flow(x)), want, *tol, msg="jit")
    assert jitted.num_kernels == 2, jitted.explain(with_source=False)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_multi_head_attention_forward_function(jit, gen):
    """F.multi_head_attention_forward with its weights as arguments: packed and separate
    projections (CLIP's attention pool), bias_k/bias_v, add_zero_attn, masks, per-head weights,
    unbatched inputs; and static_k refused by name."""
    E, H = 16, 4
    w = {n: make(s, torch.float32, gen) * 0.3 for n, s in (("ipw", (3 * E, E)), ("ipb", (3 * E,)), ("opw", (E, E)),
                                                          ("opb", (E,)), ("bk", (1, 1, E)), ("bv", (1, 1, E)),
                                                          ("qw", (E, E)), ("kw", (E, E)), ("vw", (E, E)))}
    q, kv = make((5, 2, E), torch.float32, gen), make((7, 2, E), torch.float32, gen)
    mask = torch.rand(5, 7, generator=gen) > 0.7
    mask[:, 0] = False
    kpm = torch.tensor([[False] * 6 + [True], [False] * 7])
    cases = [
        ((q, kv, kv), dict(bias_k=None, bias_v=None, add_zero_attn=False), {}),
        ((q, kv, kv), dict(bias_k="bk", bias_v="bv", add_zero_attn=True), {"attn_mask": mask,
                                                                          "average_attn_weights": False}),
        ((kv[:1], kv, kv), dict(bias_k=None, bias_v=None, add_zero_attn=False),
         {"use_separate_proj_weight": True, "q_proj_weight": "qw", "k_proj_weight": "kw", "v_proj_weight": "vw",
          "need_weights": False, "key_padding_mask": kpm}),
        ((q[:, 0], kv[:, 0], kv[:, 0]), dict(bias_k=None, bias_v=None, add_zero_attn=False), {}),
    ]
    for inputs, extra, kw in cases:
        def args(m, conv, inputs=inputs, extra=extra, kw=kw):
            pick = {k: conv(w[v]) if isinstance(v, str) else (conv(v) if isinstance(v, torch.Tensor) else v)
                    for k, v in {**extra, **kw}.items()}
            return [conv(t) for t in inputs], pick

        (tq, tk, tv), tkw = args(torch, lambda t: t)
        want = TF.multi_head_attention_forward(tq, tk, tv, E, H, w["ipw"], w["ipb"], dropout_p=0.0,
                                               out_proj_weight=w["opw"], out_proj_bias=w["opb"], training=False,
                                               **tkw)
        (fq, fk, fv), fkw = args(flow, to_flow)

        def run(a, b, c, fkw=fkw):
            return F.multi_head_attention_forward(a, b, c, E, H, to_flow(w["ipw"]), to_flow(w["ipb"]), dropout_p=0.0,
                                                  out_proj_weight=to_flow(w["opw"]), out_proj_bias=to_flow(w["opb"]),
                                                  training=False, **fkw)

        got = (flow.jit(run) if jit else run)(fq, fk, fv)
        # (float32 through two 16-term projections, a softmax and the weighted sum: rounding of a
        # few 1e-5 at outputs of magnitude ~1; atol 1e-5 once failed one element by 1.5e-5)
        close(got[0], want[0], 1e-4, 5e-5, str(kw))
        assert (got[1] is None) == (want[1] is None)
        if want[1] is not None:
            close(got[1], want[1], 1e-4, 1e-6, f"weights {kw}")
    with pytest.raises(NotImplementedError, match="static_k"):
        F.multi_head_attention_forward(to_flow(q), to_flow(kv), to_flow(kv), E, H, to_flow(w["ipw"]),
                                       to_flow(w["ipb"]), None, None, False, 0.0, to_flow(w["opw"]),
                                       to_flow(w["opb"]), static_k=to_flow(kv))
