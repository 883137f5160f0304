"""flow.nn.TransformerDecoderLayer, TransformerDecoder and Transformer against torch.nn: built with
the same arguments, state_dict keys and shapes equal to torch's, loaded from the torch module and
run on the same random inputs (every mask kind, batch_first either way, unbatched), eagerly and
under @flow.jit; training-mode dropout, autocast, initialization, errors, and (marker `gpu`) CUDA.
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

E, NHEAD, FF = 16, 4, 24
N, T, S = 2, 5, 7  # batch, target length, memory (source) length
RTOL, ATOL = 1e-4, 2e-5  # float32 through attention, layer norms and residuals


def load_twin(tm, fm):
    tsd = tm.state_dict()
    assert list(fm.state_dict()) == list(tsd), "state_dict keys differ"
    for k, v in fm.state_dict().items():
        assert tuple(v.shape) == tuple(tsd[k].shape), f"{k}: {tuple(v.shape)} != {tuple(tsd[k].shape)}"
    r = fm.load_state_dict(tsd)
    assert not r.missing_keys and not r.unexpected_keys
    return tm, fm


def layer_twin(**kw):
    kw = {"dim_feedforward": FF, **kw}
    return load_twin(torch.nn.TransformerDecoderLayer(E, NHEAD, **kw),
                     flow.nn.TransformerDecoderLayer(E, NHEAD, **kw))


def seq(length, gen, batch_first, batched=True):
    if not batched:
        return make((length, E), torch.float32, gen)
    return make((N, length, E) if batch_first else (length, N, E), torch.float32, gen)


def flowify(v):
    return to_flow(v) if isinstance(v, torch.Tensor) else v


def compare(tm, fm, args, kwargs=None, rtol=RTOL, atol=ATOL, jit=True, msg=""):
    """torch's reference runs with autograd on, so its TransformerEncoder takes the math path, not the
    inference fast path (nested tensors: it zeroes padded positions and, with a src_mask and a key
    padding mask both given, returned NaN in torch 2.15)."""
    kwargs = kwargs or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = tm(*args, **kwargs).detach()
    fargs = [flowify(a) for a in args]
    fkw = {k: flowify(v) for k, v in kwargs.items()}
    for mode, fn in [("eager", fm)] + ([("jit", flow.jit(fm))] if jit else []):
        assert_same(fn(*fargs, **fkw), expected, rtol=rtol, atol=atol, msg=f"{msg} {mode}")
    return expected


def causal_bool(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)


# ---- TransformerDecoderLayer -------------------------------------------------------------------------------


ACTIVATIONS = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
               "callable": (torch.nn.functional.silu, flow.nn.functional.silu),
               "function": (torch.nn.functional.gelu, flow.nn.functional.gelu)}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_layer(gen, norm_first, activation, batch_first, bias):
    t_act, f_act = ACTIVATIONS[activation]
    tm = torch.nn.TransformerDecoderLayer(E, NHEAD, FF, 0.1, t_act, batch_first=batch_first, norm_first=norm_first,
                                          bias=bias).eval()
    fm = flow.nn.TransformerDecoderLayer(E, NHEAD, FF, 0.1, f_act, batch_first=batch_first, norm_first=norm_first,
                                         bias=bias).eval()
    load_twin(tm, fm)
    with torch.no_grad():  # non-trivial norms
        for norm in (tm.norm1, tm.norm2, tm.norm3):
            norm.weight.uniform_(0.5, 1.5, generator=gen)
            if bias:
                norm.bias.normal_(0, 0.1, generator=gen)
    fm.load_state_dict(tm.state_dict())
    compare(tm, fm, [seq(T, gen, batch_first), seq(S, gen, batch_first)], msg=f"{activation}")


def _masks(kind, gen):
    """(torch kwargs) for one mask kind of a decoder call with tgt length T and memory length S."""
    if kind == "tgt_bool_causal":
        return {"tgt_mask": causal_bool(T)}
    if kind == "tgt_float_causal_hint":
        return {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(T), "tgt_is_causal": True}
    if kind == "tgt_float_random":
        return {"tgt_mask": torch.randn(T, T, generator=gen)}
    if kind == "tgt_3d":
        return {"tgt_mask": torch.randn(N * NHEAD, T, T, generator=gen)}
    if kind == "memory_bool":
        m = torch.rand(T, S, generator=gen) < 0.4
        m[:, 0] = False  # every query attends somewhere
        return {"memory_mask": m}
    if kind == "memory_float":
        return {"memory_mask": torch.randn(T, S, generator=gen)}
    if kind == "key_padding":
        tk = torch.zeros(N, T, dtype=torch.bool)
        tk[1, -2:] = True
        mk = torch.zeros(N, S, dtype=torch.bool)
        mk[0, -3:] = True
        return {"tgt_key_padding_mask": tk, "memory_key_padding_mask": mk}
    if kind == "float_key_padding":
        return {"tgt_key_padding_mask": torch.randn(N, T, generator=gen),
                "memory_key_padding_mask": torch.randn(N, S, generator=gen)}
    if kind == "everything":
        kw = _masks("key_padding", gen)
        kw.update(_masks("memory_float", gen))
        kw.update(tgt_mask=causal_bool(T))
        return kw
    raise ValueError(kind)


MASK_KINDS = ["tgt_bool_causal", "tgt_float_causal_hint", "tgt_float_random", "tgt_3d", "memory_bool",
              "memory_float", "key_padding", "float_key_padding", "everything"]


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_decoder_layer_masks(gen, kind, batch_first):
    tm, fm = layer_twin(dropout=0.0, batch_first=batch_first)
    tm.eval()
    fm.eval()
    compare(tm, fm, [seq(T, gen, batch_first), seq(S, gen, batch_first)], _masks(kind, gen), msg=kind)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_layer_unbatched(gen, norm_first):
    tm, fm = layer_twin(norm_first=norm_first)
    tm.eval()
    fm.eval()
    mk = torch.zeros(S, dtype=torch.bool)
    mk[-2:] = True
    kw = {"tgt_mask": causal_bool(T), "memory_key_padding_mask": mk}
    out = compare(tm, fm, [seq(T, gen, False, batched=False), seq(S, gen, False, batched=False)], kw)
    assert tuple(out.shape) == (T, E)


def test_decoder_layer_length_one_and_batch_one(gen):
    tm, fm = layer_twin(batch_first=True)
    tm.eval()
    fm.eval()
    compare(tm, fm, [make((1, 1, E), torch.float32, gen), make((1, 3, E), torch.float32, gen)])


# ---- TransformerDecoder -------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_norm", [True, False], ids=["norm", "no_norm"])
@pytest.mark.parametrize("tgt_is_causal", [None, True, False])
def test_decoder_stack(gen, with_norm, tgt_is_causal):
    tl = torch.nn.TransformerDecoderLayer(E, NHEAD, FF, 0.0, batch_first=True, norm_first=True)
    fl = flow.nn.TransformerDecoderLayer(E, NHEAD, FF, 0.0, batch_first=True, norm_first=True)
    tm = torch.nn.TransformerDecoder(tl, 3, norm=torch.nn.LayerNorm(E) if with_norm else None).eval()
    fm = flow.nn.TransformerDecoder(fl, 3, norm=flow.nn.LayerNorm(E) if with_norm else None).eval()
    with torch.no_grad():  # layers that differ from each other (clones start equal)
        for p in tm.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    load_twin(tm, fm)
    assert len(fm.layers) == 3 and fm.num_layers == 3
    w = [layer.linear1.weight for layer in fm.layers]
    assert len({t.data_ptr() for t in w}) == 3  # every layer has its own storage
    assert not np.array_equal(w[0].numpy(), w[1].numpy())
    kw = {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(T), "tgt_is_causal": tgt_is_causal,
          "memory_mask": torch.randn(T, S, generator=gen)}
    compare(tm, fm, [seq(T, gen, True), seq(S, gen, True)], kw)


def test_decoder_clones_do_not_share_the_prototype(gen):
    layer = flow.nn.TransformerDecoderLayer(E, NHEAD, FF)
    dec = flow.nn.TransformerDecoder(layer, 2)
    before = dec.layers[0].linear2.weight.numpy().copy()
    np.testing.assert_array_equal(before, layer.linear2.weight.numpy())  # clones start as copies
    layer.linear2.weight.copy_(np.zeros(tuple(layer.linear2.weight.shape), np.float32))
    np.testing.assert_array_equal(dec.layers[0].linear2.weight.numpy(), before)


# ---- Transformer ------------------------------------------------------------------------------------------


def transformer_twin(**kw):
    kw = {"d_model": E, "nhead": NHEAD, "num_encoder_layers": 2, "num_decoder_layers": 2, "dim_feedforward": FF,
          **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's nested-tensor notes
        tm = torch.nn.Transformer(**kw)
    return load_twin(tm, flow.nn.Transformer(**kw))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
def test_transformer(gen, batch_first, norm_first):
    tm, fm = transformer_twin(batch_first=batch_first, norm_first=norm_first, activation="gelu")
    tm.eval()
    fm.eval()
    assert fm.d_model == E and fm.nhead == NHEAD and fm.batch_first == batch_first
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[1, -3:] = True
    kw = {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(T), "tgt_is_causal": True,
          "src_mask": torch.randn(S, S, generator=gen), "src_key_padding_mask": pad, "memory_key_padding_mask": pad}
    out = compare(tm, fm, [seq(S, gen, batch_first), seq(T, gen, batch_first)], kw)
    assert tuple(out.shape) == ((N, T, E) if batch_first else (T, N, E))


def test_transformer_unbatched_and_no_masks(gen):
    tm, fm = transformer_twin(num_encoder_layers=1, bias=False, layer_norm_eps=1e-3)
    tm.eval()
    fm.eval()
    compare(tm, fm, [seq(S, gen, False, batched=False), seq(T, gen, False, batched=False)])
    compare(tm, fm, [seq(S, gen, False), seq(T, gen, False)])


def test_transformer_custom_encoder_and_decoder(gen):
    def parts(m):
        enc = m.nn.TransformerEncoder(m.nn.TransformerEncoderLayer(E, 2, 20, 0.0), 1)
        dec = m.nn.TransformerDecoder(m.nn.TransformerDecoderLayer(E, 2, 20, 0.0), 2, norm=m.nn.LayerNorm(E))
        return {"custom_encoder": enc, "custom_decoder": dec}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = torch.nn.Transformer(E, NHEAD, **parts(torch)).eval()
    fm = flow.nn.Transformer(E, NHEAD, **parts(flow)).eval()
    load_twin(tm, fm)
    assert fm.encoder.layers[0].linear1.out_features == 20
    compare(tm, fm, [seq(S, gen, False), seq(T, gen, False)], {"tgt_mask": causal_bool(T)})


@pytest.mark.parametrize("device", DEVICES)
def test_generate_square_subsequent_mask(device):
    m = flow.nn.Transformer.generate_square_subsequent_mask(6, device=device)
    assert m.dtype is flow.float32 and m.device.type == device and tuple(m.shape) == (6, 6)
    want = torch.nn.Transformer.generate_square_subsequent_mask(6)
    assert torch.equal(to_torch(m.cpu()), want)  # -inf above the diagonal, 0 elsewhere (inf == inf)
    m64 = flow.nn.Transformer.generate_square_subsequent_mask(3, dtype=flow.float64)
    assert m64.dtype is flow.float64
    assert torch.equal(to_torch(m64), torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64))
    assert torch.equal(to_torch(flow.nn.Transformer.generate_square_subsequent_mask(1)), torch.zeros(1, 1))


def test_transformer_init():
    """torch's _reset_parameters: xavier_uniform_ for every matrix; LayerNorms 1 / 0; in_proj_bias 0."""
    fm = flow.nn.Transformer(64, 4, 1, 1, 128)
    for name, p in fm.named_parameters():
        v = p.numpy()
        if p.ndim > 1:
            fan_out, fan_in = v.shape
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            assert np.abs(v).max() <= bound, name
            assert abs(v.std() - bound / math.sqrt(3)) < 0.1 * bound / math.sqrt(3), name
        elif "norm" in name:
            np.testing.assert_array_equal(v, 1.0 if name.endswith("weight") else 0.0, err_msg=name)
        elif "in_proj_bias" in name or "out_proj.bias" in name:
            np.testing.assert_array_equal(v, 0.0, err_msg=name)


# ---- errors ------------------------------------------------------------------------------------------------


def _raise_same(tcall, fcall):
    with pytest.raises(Exception) as te:
        tcall()
    with pytest.raises(type(te.value)) as fe:
        fcall()
    return str(te.value), str(fe.value)


def test_errors_like_torch(gen):
    tl, fl = layer_twin()
    td, fd = load_twin(torch.nn.TransformerDecoder(tl, 2), flow.nn.TransformerDecoder(fl, 2))
    tgt, mem = seq(T, gen, False), seq(S, gen, False)
    ft, fmem = to_flow(tgt), to_flow(mem)
    for t_mod, f_mod in ((tl, fl), (td, fd)):  # the is_causal hint needs a mask
        tmsg, fmsg = _raise_same(lambda: t_mod(tgt, mem, tgt_is_causal=True),
                                 lambda: f_mod(ft, fmem, tgt_is_causal=True))
        assert tmsg == fmsg
    te, fe = load_twin(torch.nn.TransformerEncoderLayer(E, NHEAD, FF), flow.nn.TransformerEncoderLayer(E, NHEAD, FF))
    tmsg, fmsg = _raise_same(lambda: te(tgt, is_causal=True), lambda: fe(ft, is_causal=True))  # the encoder too
    assert tmsg == fmsg
    tmsg, fmsg = _raise_same(lambda: tl(tgt[..., :12], mem), lambda: fl(ft[..., :12], fmem))  # wrong d_model
    assert tmsg == fmsg
    _raise_same(lambda: tl(tgt, mem[:, :1]), lambda: fl(ft, fmem[:, :1]))  # memory batch differs
    _raise_same(lambda: tl(tgt, mem[:, :1]), lambda: flow.jit(fl)(ft, fmem[:, :1]))
    tm, fm = transformer_twin()
    for src_shape, tgt_shape in (((S, N + 1, E), (T, N, E)), ((S, N, E), (T, N, E - 2))):
        src, tg = make(src_shape, torch.float32, gen), make(tgt_shape, torch.float32, gen)
        tmsg, fmsg = _raise_same(lambda: tm(src, tg), lambda: fm(to_flow(src), to_flow(tg)))
        assert tmsg == fmsg
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        flow.nn.TransformerDecoderLayer(E, NHEAD, activation="tanh")


# ---- training mode, autocast, devices ---------------------------------------------------------------------


def test_train_mode_without_dropout_matches_torch(gen):
    tm, fm = transformer_twin(dropout=0.0, batch_first=True)
    tm.train()
    fm.train()
    compare(tm, fm, [seq(S, gen, True), seq(T, gen, True)], {"tgt_mask": causal_bool(T)})


def test_dropout_in_training_decoder_under_jit(gen):
    layer = flow.nn.TransformerDecoderLayer(E, NHEAD, FF, dropout=0.3, batch_first=True).train()
    tgt, mem = to_flow(seq(T, gen, True)), to_flow(seq(S, gen, True))
    j = flow.jit(layer)
    a, b = j(tgt, mem).numpy(), j(tgt, mem).numpy()
    assert np.isfinite(a).all() and np.isfinite(b).all() and not np.array_equal(a, b)
    layer.eval()
    np.testing.assert_allclose(j(tgt, mem).numpy(), layer(tgt, mem).numpy(), rtol=1e-5, atol=1e-6)
    assert j.num_variants == 2  # the training flag is part of the guard


def _rel(got, want):
    g, w = to_torch(got).double(), want.detach().double()
    return float((g - w).abs().max() / w.abs().max())


@pytest.mark.parametrize("which", ["layer", "transformer"])
def test_autocast_bfloat16(gen, which):
    """flow.jit(model, amp="bfloat16") against torch.autocast("cpu", torch.bfloat16)."""
    tm, fm = layer_twin(batch_first=True) if which == "layer" else transformer_twin(batch_first=True)
    tm.eval()
    fm.eval()
    args = [seq(T, gen, True), seq(S, gen, True)] if which == "layer" else [seq(S, gen, True), seq(T, gen, True)]
    kw = {"tgt_mask": causal_bool(T)}
    with warnings.catch_warnings():  # autograd on: torch's math path (see compare)
        warnings.simplefilter("ignore")
        exact = tm(*args, **kw).detach()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = tm(*args, **kw).detach()
    got = flow.jit(fm, amp="bfloat16")(*[to_flow(a) for a in args], **{k: to_flow(v) for k, v in kw.items()})
    assert got.dtype is flow.as_tensor(want).dtype  # layer_norm last: float32, as torch
    err, torch_err = _rel(got, exact), _rel(flow.as_tensor(want.float()), exact)
    assert 0 < err < 3 * torch_err + 2e-3, (err, torch_err)
    assert _rel(got, want) < 3 * torch_err + 2e-3


@pytest.mark.parametrize("device", DEVICES)
def test_on_device(gen, device):
    tm, fm = transformer_twin(batch_first=True)
    tm.eval()
    fm = fm.eval().to(device)
    src, tgt = seq(S, gen, True), seq(T, gen, True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T)
    want = tm(src, tgt, tgt_mask=mask).detach()  # autograd on: torch's math path (see compare)
    fargs = [to_flow(src).to(device), to_flow(tgt).to(device)]
    fmask = flow.nn.Transformer.generate_square_subsequent_mask(T, device=device)
    for mode, fn in (("eager", fm), ("jit", flow.jit(fm))):
        got = fn(*fargs, tgt_mask=fmask)
        assert got.device.type == device
        assert_same(got.cpu(), want, rtol=RTOL, atol=ATOL, msg=f"{device} {mode}")
