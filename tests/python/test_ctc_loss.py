"""ctc_loss and CTCLoss (python/flow/nn/_ctc.py) against PyTorch: random sizes, lengths (empty
targets, inputs shorter than T, alignments that cannot exist, repeated labels that need a blank
between them, targets holding the blank), padded and concatenated targets, tensor and list
lengths, unbatched inputs, every reduction and zero_infinity, float32 and float64, eagerly, under
flow.jit and (marker `gpu`) on CUDA; and torch's errors."""
import pytest
import torch
import torch.nn.functional as TF

import flow
import flow.nn as fnn
import flow.nn.functional as F
from conftest import assert_same, make, to_flow

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not flow.cuda.is_available(), reason="no CUDA device: " + flow.cuda.unavailable_reason()[:80])]),
]


def _f(t, device):
    return to_flow(t).to(device) if device != "cpu" else to_flow(t)


def _problem(gen, T, N, C, S, repeats=False):
    """log_probs [T, N, C], padded targets [N, S] (labels 1..C-1, or runs of one label), and
    lengths: input lengths in [0, T] with T among them, target lengths in [0, S] with S among them."""
    lp = make((T, N, C), torch.float64, gen).log_softmax(2)
    if repeats:
        targets = torch.randint(1, C, (N, 1), generator=gen).expand(N, S).contiguous()
    else:
        targets = torch.randint(1, C, (N, S), generator=gen)
    il = torch.randint(0, T + 1, (N,), generator=gen)
    il[0] = T
    tl = torch.randint(0, S + 1, (N,), generator=gen)
    tl[-1] = S
    return lp, targets, il, tl


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_ctc_loss_matches_torch(jit, dtype, device, gen):
    for T, N, C, S, repeats in ((7, 4, 6, 3, False), (12, 3, 4, 5, True), (1, 2, 3, 1, False), (9, 5, 2, 4, False),
                                (5, 2, 5, 0, False)):
        lp64, targets, il, tl = _problem(gen, T, N, C, S, repeats)
        lp = lp64.to(dtype)
        for reduction in ("none", "mean", "sum"):
            for zero_infinity in (False, True):
                want = TF.ctc_loss(lp.double(), targets, il, tl, reduction=reduction, zero_infinity=zero_infinity)

                def run(a, b, c, d, reduction=reduction, zero_infinity=zero_infinity):
                    return F.ctc_loss(a, b, c, d, reduction=reduction, zero_infinity=zero_infinity)

                got = (flow.jit(run) if jit else run)(_f(lp, device), _f(targets, device), _f(il, device),
                                                       _f(tl, device))
                assert_same(got.cpu(), want.to(dtype), rtol=1e-5 if dtype == torch.float32 else 1e-10,
                            atol=2e-5 if dtype == torch.float32 else 1e-10,
                            msg=f"T={T} N={N} C={C} S={S} {reduction} zero_infinity={zero_infinity}")


def test_ctc_loss_argument_forms(gen):
    lp, targets, il, tl = _problem(gen, 8, 3, 5, 4)
    lp = lp.float()
    want = TF.ctc_loss(lp, targets, il, tl, reduction="none")
    # concatenated targets, list lengths, int32 lengths, float targets (torch casts them)
    flat = torch.cat([targets[n, :tl[n]] for n in range(3)])
    assert_same(F.ctc_loss(to_flow(lp), to_flow(flat), to_flow(il), to_flow(tl), reduction="none"), want)
    assert_same(F.ctc_loss(to_flow(lp), to_flow(targets), il.tolist(), tl.tolist(), reduction="none"), want)
    assert_same(F.ctc_loss(to_flow(lp), to_flow(targets.int()), to_flow(il.int()), to_flow(tl.int()),
                           reduction="none"), want)
    assert_same(F.ctc_loss(to_flow(lp), to_flow(targets.float()), to_flow(il), to_flow(tl), reduction="none"), want)
    # a blank other than 0, and targets holding the blank (torch's recursion, whatever it means)
    odd = targets.clone()
    odd[0, 0] = 0
    assert_same(F.ctc_loss(to_flow(lp), to_flow(odd), to_flow(il), to_flow(tl), blank=4, reduction="none"),
                TF.ctc_loss(lp, odd, il, tl, blank=4, reduction="none"), atol=2e-5)
    assert_same(F.ctc_loss(to_flow(lp), to_flow(odd), to_flow(il), to_flow(tl), reduction="none"),
                TF.ctc_loss(lp, odd, il, tl, reduction="none"), atol=2e-5)
    # unbatched (torch wants the target's own length there)
    one = targets[-1, :tl[-1]]
    assert_same(F.ctc_loss(to_flow(lp[:, 0]), to_flow(one), to_flow(il[0]), to_flow(tl[-1]), reduction="none"),
                TF.ctc_loss(lp[:, 0], one, il[0], tl[-1], reduction="none"))
    # the module
    module, fmodule = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True), \
        fnn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert_same(fmodule(to_flow(lp), to_flow(targets), to_flow(il), to_flow(tl)), module(lp, targets, il, tl),
                atol=1e-4)


def test_ctc_loss_errors_as_torch(gen):
    lp, targets, il, tl = _problem(gen, 6, 3, 5, 3)
    lp = lp.float()
    cases = [
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a, b, c * 0 + 7, d),  # an input longer than T
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a, b, c, d * 0 + 4),  # a target longer than S
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a, b, c, d, blank=5),
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a, b, c, d, reduction="batchmean"),
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a.half(), b, c, d),
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a, b, c.float(), d),
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a, b[:2], c, d),
        lambda m, a, b, c, d: m.nn.functional.ctc_loss(a[:0], b, c * 0, d),
    ]
    tl = tl.clamp(max=2)
    for fn in cases:
        with pytest.raises(Exception) as te:
            fn(torch, lp, targets, il.clamp(max=5), tl)
        with pytest.raises(type(te.value)) as fe:
            fn(flow, to_flow(lp), to_flow(targets), to_flow(il.clamp(max=5)), to_flow(tl))
        assert str(fe.value) == str(te.value)
    with pytest.raises(flow.TraceError, match="concatenated 1-D targets"):
        flow.jit(lambda a, b, c, d: F.ctc_loss(a, b, c, d))(to_flow(lp), to_flow(targets.reshape(-1)), to_flow(il),
                                                            to_flow(tl))
