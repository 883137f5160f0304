"""torch.nn.utils.rnn's padding helpers (PackedSequence is not supported: flow's RNNs take padded
batches)."""
from ... import _creation, _ops
from ..._tensor import Tensor

__all__ = ["pad_sequence", "unpad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks tensors of shapes [L_i, *] into [max L, B, *] ([B, max L, *] with batch_first),
    filling with padding_value on the right (or the left)."""
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = _creation.full([missing] + list(s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = _ops.cat([s, fill] if padding_side == "right" else [fill, s])
        rows.append(s)
    return _ops.stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence (right padding): the first lengths[i] rows of each sequence."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :int(n)] for i, n in enumerate(lengths.tolist() if isinstance(lengths, Tensor) else lengths)]
