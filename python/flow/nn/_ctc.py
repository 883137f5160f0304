"""torch.nn.functional.ctc_loss: the connectionist temporal classification loss (forward only).

Note: the loss is torch's alpha recursion in log space over the extended targets (a blank before,
between and after the labels: 2 * S + 1 states), written as tensor ops over [N, 2 * S + 1] and
unrolled over the T time steps, so it runs eagerly and traces under @flow.jit like any other
composition (T steps of a few elementwise ops: meant for the sequence lengths of speech and OCR
heads, not for very long T). A state moves to itself, to the next state, or skips one where the
state two back holds another symbol (torch's rule exactly, even for targets holding the blank).
Samples shorter than T keep their states after their last frame (a select per step), so the loss
reads every sample's alpha at the end. Padded [N, S] targets take tensor lengths under @flow.jit;
torch's concatenated 1-D targets need the lengths on the host (eagerly, or as Python ints).
"""
import builtins
import math

import numpy as np

from .. import _creation
from .. import _dtype as D
from .. import _ops
from .._errors import trace_error
from .._tensor import Tensor
from . import functional as F

__all__ = ["ctc_loss"]


def _lengths(v, n, name, T):
    """Input or target lengths as an int64 tensor of n entries, and their host values where known."""
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point or v.dtype is D.bool_:
            raise RuntimeError(f"{name} must be integral")
        t = F._reshape(v, [n]) if v.ndim == 0 else v
        host = None if t._c is None else [builtins.int(e) for e in t.cpu().tolist()]
        if t.dtype is not D.int64:
            t = _ops._cast(t, D.int64)
    else:
        host = [builtins.int(e) for e in (v if isinstance(v, (list, tuple)) else [v])]
        t = F._const(np.array(host, dtype=np.int64), T, D.int64)
    if host is not None and len(host) != n:
        raise RuntimeError(f"Expected tensor to have size {n} at dimension 0, but got size {len(host)} for argument "
                           f"'{name}' (while checking arguments for ctc_loss_allocate_outputs)")
    return t, host


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    lp = F._check_tensor("ctc_loss", log_probs, "log_probs")
    tg = F._check_tensor("ctc_loss", targets, "targets")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if lp.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for '{lp.dtype._torch_short}'")
    if lp.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected a 2-D (unbatched) or 3-D log_probs [T, N, C], got size "
                           f"{list(lp.shape)}")
    unbatched = lp.ndim == 2
    if unbatched:
        lp = F._unsqueeze(lp, 1)
        if tg.ndim == 1:
            tg = F._unsqueeze(tg, 0)
    if lp.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    T, N, C = lp.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    il, il_host = _lengths(input_lengths, N, "input_lengths", lp)
    tl, tl_host = _lengths(target_lengths, N, "target_lengths", lp)
    if il_host is not None and builtins.max(il_host) > T:
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {builtins.max(il_host)} "
                           "(while checking arguments for ctc_loss_allocate_outputs)")
    tg = tg if tg.dtype is D.int64 else _ops._cast(tg, D.int64)
    if tg.ndim == 1:  # torch's concatenated targets: padded to [N, max length] on the host
        if tl_host is None or tg._c is None:
            raise trace_error("ctc_loss", "concatenated 1-D targets need their lengths on the host; pass padded "
                                          "[N, S] targets")
        flat = tg.cpu().numpy()
        if sum(tl_host) > flat.size:
            raise RuntimeError(f"Expected tensor to have size at least {sum(tl_host)} at dimension 0, but got size "
                               f"{flat.size} for argument #2 'targets' (while checking arguments for "
                               "ctc_loss_allocate_outputs)")
        padded = np.zeros((N, builtins.max(tl_host + [0])), dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(tl_host)])
        for n, length in enumerate(tl_host):
            padded[n, :length] = flat[offsets[n]:offsets[n] + length]
        tg = F._const(padded, lp, D.int64).to(lp.device)
    elif tg.ndim != 2 or tg.shape[0] != N:
        raise RuntimeError(f"Expected tensor to have size {N} at dimension 0, but got size {tg.shape[0]} for argument "
                           "#2 'targets' (while checking arguments for ctc_loss_allocate_outputs)")
    S = tg.shape[1]
    if tl_host is not None and builtins.max(tl_host) > S:
        raise RuntimeError(f"Expected tensor to have size at least {builtins.max(tl_host)} at dimension 1, but got "
                           f"size {S} for argument #2 'targets' (while checking arguments for "
                           "ctc_loss_allocate_outputs)")
    L = 2 * S + 1
    # The extended targets [N, L]: blank, t0, blank, t1, ..., blank; and where a state may skip one.
    if S:
        label_at = F._const(np.clip((np.arange(L) - 1) // 2, 0, S - 1), lp, D.int64)
        labels = _ops.gather(tg, 1, F._expand(F._unsqueeze(label_at, 0), [N, L]))
        ext = _ops.where(F._const(np.arange(L) % 2 == 1, lp, D.bool_), labels, blank)
    else:
        ext = F._reshape(_creation.full_like(il, blank), [N, 1])
    lp_ext = _ops.gather(lp, 2, F._expand(F._unsqueeze(ext, 0), [T, N, L]))  # [T, N, L]
    neg_inf = _creation.full_like(F._select(lp_ext, 0, 0), -math.inf)
    if L > 2:
        skip = _ops.ne(F._slice(ext, 1, 2, L), F._slice(ext, 1, 0, L - 2))
        skip = F._cat([_creation.zeros_like(F._slice(skip, 1, 0, 2)), skip], 1)  # [N, L]
    alpha = _ops.where(F._const(np.arange(L) < 2, lp, D.bool_), F._select(lp_ext, 0, 0), neg_inf)
    frames = F._unsqueeze(il, 1)
    for t in range(1, T):
        terms = [alpha, F._cat([F._slice(neg_inf, 1, 0, 1), F._slice(alpha, 1, 0, L - 1)], 1)]
        if L > 2:
            shift2 = F._cat([F._slice(neg_inf, 1, 0, 2), F._slice(alpha, 1, 0, L - 2)], 1)
            terms.append(_ops.where(skip, shift2, -math.inf))
        step = _ops.logsumexp(_ops.stack(terms, 0), 0) + F._select(lp_ext, 0, t)
        alpha = _ops.where(_ops.gt(frames, t), step, alpha)
    last = _ops.gather(alpha, 1, F._unsqueeze(2 * tl, 1))
    before = _ops.gather(alpha, 1, F._unsqueeze(_ops.clamp(2 * tl - 1, 0), 1))
    before = _ops.where(_ops.gt(F._unsqueeze(tl, 1), 0), before, -math.inf)
    loss = -F._reshape(_ops.logsumexp(_ops.cat([last, before], 1), 1), [N])
    # No frames at all: an empty target has probability 1, any other 0.
    loss = _ops.where(_ops.eq(il, 0), _ops.where(_ops.eq(tl, 0), 0.0, math.inf), loss)
    if zero_infinity:
        loss = _ops.where(_ops.eq(loss, math.inf), 0.0, loss)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return (loss / _ops.clamp(tl, 1).to(loss.dtype)).mean()
    return F._reshape(loss, []) if unbatched else loss
