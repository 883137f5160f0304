"""flow.nn.RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell against torch.nn: each module built with
the same arguments, its state_dict keys and shapes equal to torch's, loaded from the torch module and
run on the same random inputs, eagerly and under @flow.jit (where the time loop unrolls). Also:
default initialization, train-mode dropout between layers, autocast, argument errors, and (marker
`gpu`) a CUDA run.
"""
import math
import warnings

import numpy as np
import pytest
import torch

import flow
from conftest import assert_same, make, to_flow, to_torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]

RTOL, ATOL = 1e-5, 2e-6  # float32: products of small matrices through sigmoid / tanh, step by step
I, H = 5, 7  # input_size, hidden_size


def twin(name, *args, **kwargs):
    """(torch module, flow module) with the same arguments; flow loaded from torch's state_dict."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "LSTM with projections is not supported with oneDNN"
        tm = getattr(torch.nn, name)(*args, **kwargs)
        fm = getattr(flow.nn, name)(*args, **kwargs)
    tsd, fsd = tm.state_dict(), fm.state_dict()
    assert list(fsd) == list(tsd), f"{name}: state_dict keys {list(fsd)} != torch's {list(tsd)}"
    for k, v in fsd.items():
        assert tuple(v.shape) == tuple(tsd[k].shape), f"{name}.{k}: {tuple(v.shape)} != {tuple(tsd[k].shape)}"
        assert v.dtype is flow.as_tensor(tsd[k]).dtype, f"{name}.{k}: dtype {v.dtype}"
    r = fm.load_state_dict(tsd)
    assert not r.missing_keys and not r.unexpected_keys
    return tm, fm


def flat(out):
    """(output, h) / (output, (h, c)) / h / (h, c) as a flat list."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def compare(tm, fm, args, rtol=RTOL, atol=ATOL, jit=True, msg=""):
    """Runs torch and flow (eager and @flow.jit) on the same arguments; every output must match."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = flat(tm(*args))
    fargs = [tuple(to_flow(t) for t in a) if isinstance(a, tuple) else
             (to_flow(a) if isinstance(a, torch.Tensor) else a) for a in args]
    runs = [("eager", fm)] + ([("jit", flow.jit(fm))] if jit else [])
    for mode, fn in runs:
        got = flat(fn(*fargs))
        assert len(got) == len(expected), f"{msg} {mode}: {len(got)} outputs, torch has {len(expected)}"
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, rtol=rtol, atol=atol, msg=f"{msg} {mode} output {k}")
    return expected


# ---- the multi-layer modules ----------------------------------------------------------------------------

MODES = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("GRU", {}), ("LSTM", {})]
CONFIGS = [
    dict(T=5, N=3),
    dict(T=1, N=1, h0=True),
    dict(T=7, N=2, num_layers=2, h0=True),
    dict(T=4, N=3, bidirectional=True),
    dict(T=5, N=2, num_layers=2, bidirectional=True, batch_first=True, h0=True),
    dict(T=3, N=4, bias=False, batch_first=True),
    dict(T=6, N=None),
    dict(T=5, N=None, num_layers=2, bidirectional=True, batch_first=True, h0=True),
]
PROJ_CONFIGS = [
    dict(T=5, N=3, proj_size=3),
    dict(T=4, N=2, proj_size=2, num_layers=2, bidirectional=True, batch_first=True, h0=True),
    dict(T=3, N=None, proj_size=4, bias=False, h0=True),
]


def config_id(c):
    return "-".join(f"{k}{'' if v is True else v}" for k, v in c.items())


def make_args(name, tm, cfg, gen, dtype=torch.float32):
    """Input (and h0 / (h0, c0) when cfg says so) for torch module tm, shaped as cfg asks."""
    T, N = cfg["T"], cfg["N"]
    bf = cfg.get("batch_first", False)
    shape = (T, I) if N is None else ((N, T, I) if bf else (T, N, I))
    x = make(shape, dtype, gen)
    if not cfg.get("h0"):
        return [x]
    L = tm.num_layers * (2 if tm.bidirectional else 1)
    hsize = tm.proj_size if getattr(tm, "proj_size", 0) else tm.hidden_size
    lead = (L,) if N is None else (L, N)
    h0 = make(lead + (hsize,), dtype, gen) * 0.5
    if name == "LSTM":
        return [x, (h0, make(lead + (tm.hidden_size,), dtype, gen) * 0.5)]
    return [x, h0]


def module_kwargs(cfg):
    return {k: v for k, v in cfg.items() if k not in ("T", "N", "h0")}


@pytest.mark.parametrize("cfg", CONFIGS, ids=config_id)
@pytest.mark.parametrize("name,extra", MODES, ids=["rnn_tanh", "rnn_relu", "gru", "lstm"])
def test_recurrent_modules_match_torch(gen, name, extra, cfg):
    tm, fm = twin(name, I, H, **extra, **module_kwargs(cfg))
    tm.eval()
    fm.eval()
    out = compare(tm, fm, make_args(name, tm, cfg, gen), msg=f"{name} {cfg}")
    # torch's shapes: output [T, N, D * H] (batch_first: [N, T, D * H]; unbatched: [T, D * H]).
    D = 2 if cfg.get("bidirectional") else 1
    T, N = cfg["T"], cfg["N"]
    want = (T, D * H) if N is None else ((N, T, D * H) if cfg.get("batch_first") else (T, N, D * H))
    assert tuple(out[0].shape) == want


@pytest.mark.parametrize("cfg", PROJ_CONFIGS, ids=config_id)
def test_lstm_with_projections(gen, cfg):
    tm, fm = twin("LSTM", I, H, **module_kwargs(cfg))
    assert "weight_hr_l0" in fm.state_dict()
    tm.eval()
    fm.eval()
    out = compare(tm, fm, make_args("LSTM", tm, cfg, gen), msg=f"LSTM {cfg}")
    assert out[1].shape[-1] == cfg["proj_size"] and out[2].shape[-1] == H  # h_n projected, c_n not


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_long_sequence(gen, name):
    """64 steps, two layers: errors may accumulate through the recurrence (slightly looser atol)."""
    tm, fm = twin(name, 6, 12, num_layers=2, batch_first=True)
    tm.eval()
    fm.eval()
    compare(tm, fm, [make((3, 64, 6), torch.float32, gen)], rtol=1e-4, atol=1e-5, msg=f"{name} T=64")


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_float64(gen, name):
    tm, fm = twin(name, I, H, num_layers=2, bidirectional=True, dtype=torch.float64)
    assert fm.weight_ih_l0.dtype is flow.float64
    compare(tm, fm, [make((4, 2, I), torch.float64, gen)], rtol=1e-12, atol=1e-12, jit=False, msg=f"{name} float64")


def test_nan_propagates(gen):
    tm, fm = twin("LSTM", I, H, num_layers=2)
    x = make((4, 2, I), torch.float32, gen)
    x[1, 0, 2] = float("nan")  # batch 0 is NaN from step 1 on, batch 1 stays finite
    out = compare(tm, fm, [x], msg="LSTM NaN input")
    assert torch.isnan(out[0][1:, 0]).all() and not torch.isnan(out[0][:, 1]).any()


def test_empty_batch(gen):
    tm, fm = twin("GRU", I, H, num_layers=2)
    compare(tm, fm, [make((3, 0, I), torch.float32, gen)], msg="GRU batch 0")


def test_new_sequence_length_is_a_new_variant(gen):
    tm, fm = twin("LSTM", I, H)
    j = flow.jit(fm)
    for T in (3, 6, 3):
        x = make((T, 2, I), torch.float32, gen)
        with torch.no_grad():
            want = tm(x)[0]
        assert_same(j(to_flow(x))[0], want, rtol=RTOL, atol=ATOL, msg=f"T={T}")
    assert j.num_variants == 2


def test_lstm_inside_a_jitted_model(gen):
    """The usual classifier: embedding -> LSTM -> linear on the last step, as one compiled graph."""
    def classifier(m):  # the same model file for torch and for flow (`import flow as torch`)
        class Classifier(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = m.nn.Embedding(20, 8)
                self.lstm = m.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
                self.fc = m.nn.Linear(32, 3)

            def forward(self, ids):
                out, (h, c) = self.lstm(self.emb(ids))
                return self.fc(out[:, -1]) + h.sum(0).mean() + c[-1].mean()

        return Classifier().eval()

    tm, fm = classifier(torch), classifier(flow)
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict(tm.state_dict())
    ids = torch.randint(0, 20, (4, 9), generator=gen)
    with torch.no_grad():
        want = tm(ids)
    assert_same(fm(to_flow(ids)), want, rtol=1e-5, atol=1e-5, msg="eager")
    assert_same(flow.jit(fm)(to_flow(ids)), want, rtol=1e-5, atol=1e-5, msg="jit")


# ---- cells ----------------------------------------------------------------------------------------------

CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("GRUCell", {}), ("LSTMCell", {}),
         ("GRUCell", {"bias": False}), ("LSTMCell", {"bias": False})]


@pytest.mark.parametrize("hx", [False, True], ids=["no_hx", "hx"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("name,extra", CELLS, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())))
def test_cells_match_torch(gen, name, extra, batched, hx):
    tm, fm = twin(name, I, H, **extra)
    lead = (3,) if batched else ()
    args = [make(lead + (I,), torch.float32, gen)]
    if hx:
        h = make(lead + (H,), torch.float32, gen) * 0.5
        args.append((h, make(lead + (H,), torch.float32, gen) * 0.5) if name == "LSTMCell" else h)
    compare(tm, fm, args, msg=f"{name} {extra}")


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell"])
def test_cell_loop_under_jit(gen, name):
    """A hand-written time loop over a cell, compiled whole, against torch's loop."""
    tm, fm = twin(name, I, H)
    x = make((6, 2, I), torch.float32, gen)

    def loop(cell, xs):
        state, outs = None, []
        for t in range(xs.shape[0]):
            state = cell(xs[t], state)
            outs.append(state[0] if isinstance(state, tuple) else state)
        return outs[-1] * 2 + outs[0]

    with torch.no_grad():
        want = loop(tm, x)
    assert_same(loop(fm, to_flow(x)), want, rtol=RTOL, atol=ATOL, msg="eager")
    assert_same(flow.jit(lambda xs: loop(fm, xs))(to_flow(x)), want, rtol=RTOL, atol=ATOL, msg="jit")


# ---- parameters and initialization ----------------------------------------------------------------------


@pytest.mark.parametrize("name,kw", [("LSTM", dict(num_layers=3, bidirectional=True, proj_size=4)),
                                     ("GRU", dict(num_layers=2, bias=False)), ("RNN", dict(bidirectional=True)),
                                     ("LSTMCell", {}), ("GRUCell", {}), ("RNNCell", dict(bias=False))])
def test_default_init_is_torchs_distribution(name, kw):
    """Every parameter is U(-1/sqrt(hidden), 1/sqrt(hidden)): in range, mean ~0, variance bound^2 / 3."""
    flow.manual_seed(torch.initial_seed() % 2**31)
    hidden = 40
    tm = getattr(torch.nn, name)(30, hidden, **kw)
    fm = getattr(flow.nn, name)(30, hidden, **kw)
    assert [(k, tuple(v.shape)) for k, v in fm.named_parameters()] == \
        [(k, tuple(v.shape)) for k, v in tm.named_parameters()]
    bound = 1 / math.sqrt(hidden)
    values = np.concatenate([p.numpy().ravel() for p in fm.parameters()])
    assert np.abs(values).max() <= bound
    n = values.size
    assert abs(values.mean()) < 5 * bound / math.sqrt(3 * n)
    assert abs(values.var() - bound ** 2 / 3) < 0.1 * bound ** 2 / 3
    for p in fm.parameters():  # each tensor is drawn, not a copy of another
        assert np.unique(p.numpy()).size > 0.9 * p.numel()


def test_module_attributes():
    fm = flow.nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2, batch_first=True, dropout=0.25)
    tm = torch.nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2, batch_first=True, dropout=0.25)
    assert repr(fm) == repr(tm)
    assert fm._flat_weights_names == tm._flat_weights_names
    assert [[tuple(w.shape) for w in ws] for ws in fm.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
    for name in ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional",
                 "proj_size", "mode"):
        assert getattr(fm, name) == getattr(tm, name), name
    assert repr(flow.nn.RNN(3, 4, nonlinearity="relu")) == repr(torch.nn.RNN(3, 4, nonlinearity="relu"))
    assert repr(flow.nn.GRUCell(3, 4, bias=False)) == repr(torch.nn.GRUCell(3, 4, bias=False))
    assert flow.nn.RNN(3, 4, 2, "relu").nonlinearity == "relu"  # torch's positional order


def test_state_dict_round_trip_and_module_to(gen):
    """flow -> torch state_dict (the other direction), and .double() keeps the module working."""
    fm = flow.nn.GRU(I, H, num_layers=2, bidirectional=True).eval()
    tm = torch.nn.GRU(I, H, num_layers=2, bidirectional=True).eval()
    tm.load_state_dict({k: to_torch(v) for k, v in fm.state_dict().items()})
    x = make((4, 3, I), torch.float32, gen)
    compare(tm, fm, [x], msg="flow's weights in torch")
    compare(tm.double(), fm.double(), [x.double()], rtol=1e-12, atol=1e-12, jit=False, msg="double()")


# ---- training mode: dropout between layers --------------------------------------------------------------


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_train_mode_without_dropout_matches_torch(gen, name):
    tm, fm = twin(name, I, H, num_layers=2, dropout=0.0)
    tm.train()
    fm.train()
    compare(tm, fm, [make((5, 2, I), torch.float32, gen)], msg=f"{name} train p=0")


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_dropout_one_zeroes_the_next_layers_input(gen, name):
    """p=1 is deterministic: layer 1 sees zeros (so only its recurrence and biases act), the last layer's
    output is not dropped. Same as torch's train mode."""
    tm, fm = twin(name, I, H, num_layers=3, dropout=1.0)
    tm.train()
    fm.train()
    compare(tm, fm, [make((4, 3, I), torch.float32, gen)], msg=f"{name} train p=1")


def _identity_second_layer(fm):
    """A 2-layer relu RNN whose first layer's outputs are positive and whose second layer passes its
    (dropped-out) input through: train output = eval output * mask / (1 - p)."""
    n = fm.hidden_size
    fm.weight_hh_l0.copy_(np.zeros((n, n), np.float32))
    fm.bias_ih_l0.copy_(np.full(n, 1.0, np.float32))
    fm.weight_ih_l1.copy_(np.eye(n, dtype=np.float32))
    fm.weight_hh_l1.copy_(np.zeros((n, n), np.float32))
    fm.bias_ih_l1.copy_(np.zeros(n, np.float32))
    fm.bias_hh_l1.copy_(np.zeros(n, np.float32))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_dropout_between_layers_statistics(gen, jit):
    p = 0.3
    fm = flow.nn.RNN(4, 16, num_layers=2, nonlinearity="relu", dropout=p)
    _identity_second_layer(fm)
    x = to_flow(make((20, 8, 4), torch.float32, gen) * 0.1)
    run = flow.jit(fm) if jit else fm
    fm.eval()
    clean = fm(x)[0].numpy()
    assert (clean > 0).all()
    fm.train()
    masks = []
    for _ in range(2):
        y = run(x)[0].numpy()
        dropped = y == 0
        np.testing.assert_allclose(y[~dropped], clean[~dropped] / (1 - p), rtol=1e-6)
        n = y.size
        assert abs(dropped.mean() - p) < 5 * math.sqrt(p * (1 - p) / n), dropped.mean()
        masks.append(dropped)
    assert (masks[0] != masks[1]).mean() > 0.5 * 2 * p * (1 - p)  # a new mask on every call
    fm.eval()
    np.testing.assert_array_equal(run(x)[0].numpy(), clean)  # eval: no dropout (a new jit variant)


# ---- autocast -----------------------------------------------------------------------------------------------


def _rel(got, want):
    g, w = to_torch(got).double(), want.detach().double()
    return float((g - w).abs().max() / w.abs().max())


@pytest.mark.parametrize("name,kw", [("LSTM", dict(num_layers=2)), ("LSTM", dict(proj_size=4)),
                                     ("GRU", dict(bidirectional=True)), ("RNN", dict(num_layers=2))])
def test_autocast_bfloat16(gen, name, kw):
    """flow.jit(model, amp="bfloat16") against torch.autocast("cpu", torch.bfloat16): the GEMMs in
    bfloat16, as close to the float32 result as torch's own autocast result is."""
    tm, fm = twin(name, 8, 16, **kw)
    tm.eval()
    fm.eval()
    x = make((10, 3, 8), torch.float32, gen)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact = tm(x)[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = tm(x)[0]
    got = flow.jit(fm, amp="bfloat16")(to_flow(x))[0]
    assert got.dtype in (flow.float32, flow.bfloat16)
    with flow.autocast("cpu", dtype=flow.bfloat16):
        eager = fm(to_flow(x))[0]
    assert eager.dtype is got.dtype
    err, torch_err = _rel(got.float(), exact), _rel(flow.as_tensor(want.float()), exact)
    assert 0 < err < 3 * torch_err + 2e-3, (err, torch_err)  # 0 < : the GEMMs did run in bfloat16
    assert _rel(got.float(), want.float()) < 3 * torch_err + 2e-3
    if name != "LSTM" or "proj_size" in kw:  # torch's composite cells: the same casts in the same places
        assert got.dtype is flow.as_tensor(want).dtype
        assert _rel(got.float(), want.float()) < 1e-2


# ---- errors ------------------------------------------------------------------------------------------------


BAD_CALLS = [
    ("LSTM", {}, lambda m: [m.zeros(2, 3, 4, I)]),                          # 4-D input
    ("GRU", {}, lambda m: [m.zeros(2, 3, 4, I)]),
    ("RNN", {}, lambda m: [m.zeros(I)]),                                     # 1-D input
    ("RNN", {"batch_first": True}, lambda m: [m.zeros(3, 0, I)]),            # empty sequence, batch_first
    ("GRU", {}, lambda m: [m.zeros(4, 3, I + 1)]),                           # wrong input_size
    ("RNN", {}, lambda m: [m.zeros(4, 3, I), m.zeros(1, 2, H)]),             # h0 batch mismatch
    ("RNN", {"num_layers": 2}, lambda m: [m.zeros(4, 3, I), m.zeros(1, 3, H)]),  # h0 layers mismatch
    ("GRU", {}, lambda m: [m.zeros(4, 3, I), m.zeros(3, H)]),                # 2-D h0 for batched input
    ("GRU", {}, lambda m: [m.zeros(4, I), m.zeros(1, 1, H)]),                # 3-D h0 for unbatched input
    ("LSTM", {}, lambda m: [m.zeros(4, 3, I), (m.zeros(1, 3, H), m.zeros(1, 2, H))]),  # c0 mismatch
    ("LSTM", {}, lambda m: [m.zeros(4, 3, I), (m.zeros(1, 3, H + 1), m.zeros(1, 3, H))]),  # h0 size
    ("LSTM", {"proj_size": 3}, lambda m: [m.zeros(4, 3, I), (m.zeros(1, 3, H), m.zeros(1, 3, H))]),  # h0 not proj
    ("LSTM", {}, lambda m: [m.zeros(4, I), (m.zeros(1, 1, H), m.zeros(1, 1, H))]),  # 3-D states, unbatched
    ("LSTM", {}, lambda m: [m.zeros(0, 3, I)]),                              # empty sequence
    ("LSTM", {}, lambda m: [m.zeros(4, 3, I, dtype=m.float64)]),            # dtype mismatch
    ("LSTMCell", {}, lambda m: [m.zeros(3, I + 1)]),                          # wrong input_size
    ("LSTMCell", {}, lambda m: [m.zeros(3, I), (m.zeros(2, H), m.zeros(3, H))]),  # batch mismatch
    ("GRUCell", {}, lambda m: [m.zeros(3, I), m.zeros(3, H + 2)]),           # wrong hidden size
    ("GRUCell", {}, lambda m: [m.zeros(3, I), m.zeros(H)]),                  # 1-D hidden for batched input
    ("RNNCell", {}, lambda m: [m.zeros(2, 3, I)]),                           # 3-D input
    ("RNNCell", {}, lambda m: [m.zeros(3, I), m.zeros(1, 3, H)]),            # 3-D hidden
]


@pytest.mark.parametrize("case", range(len(BAD_CALLS)))
def test_bad_arguments_raise_like_torch(case):
    name, kw, args = BAD_CALLS[case]
    tm = getattr(torch.nn, name)(I, H, **kw)
    fm = getattr(flow.nn, name)(I, H, **kw)
    with pytest.raises(Exception) as te:
        tm(*args(torch))
    for mode, fn in (("eager", fm), ("jit", flow.jit(fm))):
        with pytest.raises(type(te.value)) as fe:
            fn(*args(flow))
        assert str(fe.value).replace("flow.", "torch.") == str(te.value), mode


@pytest.mark.parametrize("name,args,kw", [
    ("LSTM", (4, 6), {"proj_size": 6}), ("LSTM", (4, 6), {"proj_size": -1}), ("GRU", (4, 6), {"proj_size": 2}),
    ("RNN", (4, 6), {"nonlinearity": "gelu"}), ("RNN", (4, 6), {"dropout": 1.5}), ("GRU", (4, 6), {"dropout": True}),
    ("LSTM", (4, 6), {"num_layers": 0}), ("LSTM", (0, 6), {}), ("GRU", (4, 0), {}), ("RNN", (4.0, 6), {}),
    ("LSTM", (4, 6), {"bias": 1}), ("GRU", (4, 6), {"batch_first": None}),
])
def test_bad_constructor_arguments(name, args, kw):
    with pytest.raises(Exception) as te:
        getattr(torch.nn, name)(*args, **kw)
    with pytest.raises(type(te.value)) as fe:
        getattr(flow.nn, name)(*args, **kw)
    assert str(fe.value) == str(te.value)


def test_dropout_with_one_layer_warns_like_torch():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        flow.nn.GRU(3, 4, dropout=0.5)


def test_packed_sequence_is_refused(gen):
    packed = torch.nn.utils.rnn.pack_padded_sequence(make((4, 2, I), torch.float32, gen), [4, 2])
    for name in ("LSTM", "GRU", "RNN"):
        with pytest.raises(NotImplementedError, match="PackedSequence"):
            getattr(flow.nn, name)(I, H)(packed)


def test_unknown_cell_nonlinearity_raises_at_call_like_torch():
    tm, fm = torch.nn.RNNCell(I, H, nonlinearity="gelu"), flow.nn.RNNCell(I, H, nonlinearity="gelu")
    with pytest.raises(RuntimeError, match="Unknown nonlinearity"):
        tm(torch.zeros(2, I))
    with pytest.raises(RuntimeError, match="Unknown nonlinearity"):
        fm(flow.zeros(2, I))


# ---- devices -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_on_device(gen, device, name):
    tm, fm = twin(name, I, H, num_layers=2, bidirectional=True, batch_first=True)
    tm.eval()
    fm = fm.eval().to(device)
    x = make((3, 6, I), torch.float32, gen)
    with torch.no_grad():
        want = flat(tm(x))
    for mode, fn in (("eager", fm), ("jit", flow.jit(fm))):
        got = flat(fn(to_flow(x).to(device)))
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.device.type == device
            assert_same(g.cpu(), w, rtol=1e-4, atol=1e-5, msg=f"{name} {device} {mode} output {k}")
