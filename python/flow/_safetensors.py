"""Reading and writing the safetensors format (https://github.com/huggingface/safetensors) for flow
tensors, used by flow.save/flow.load for weights.

Note: written here rather than through the ``safetensors`` package because that package's numpy
API has no bfloat16 and its torch API needs torch tensors; the format is small: an 8-byte
little-endian header length, a JSON header ``{name: {"dtype", "shape", "data_offsets"}}`` plus
optional ``__metadata__`` (string to string), then the raw little-endian bytes of each tensor. The
tests check that files written here load with the ``safetensors`` package and the reverse.
"""
import json
import struct

import numpy as np

from . import _C

# flow dtype name -> (safetensors dtype, numpy dtype of the raw bytes)
_DTYPES = {
    "float32": ("F32", np.float32), "float64": ("F64", np.float64), "float16": ("F16", np.float16),
    "bfloat16": ("BF16", np.uint16), "int64": ("I64", np.int64), "int32": ("I32", np.int32),
    "bool": ("BOOL", np.bool_), "uint8": ("U8", np.uint8), "int8": ("I8", np.int8), "int16": ("I16", np.int16),
}
_FROM_ST = {st: (name, npd) for name, (st, npd) in _DTYPES.items()}


def save_file(tensors, path, metadata=None):
    """Writes ``{name: flow.Tensor}`` to ``path`` (tensors on a GPU are copied to the host first, as
    safetensors does for torch)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        c = tensors[name]._c
        if c.device != "cpu":
            c = c.to_device("cpu")
        st, npd = _DTYPES[c.dtype]
        raw = np.ascontiguousarray(c.numpy_view()).astype(npd, copy=False).tobytes()
        header[name] = {"dtype": st, "shape": list(c.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load_file(path):
    """``({name: flow.Tensor}, metadata)`` from a safetensors file. Raises ValueError naming the file
    for anything malformed."""
    from ._tensor import Tensor

    with open(path, "rb") as f:
        data = f.read()
    try:
        (n,) = struct.unpack_from("<Q", data, 0)
        if n > len(data) - 8:
            raise ValueError("header length past the end of the file")
        header = json.loads(data[8:8 + n].decode())
    except (struct.error, UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not a safetensors file ({e})") from None
    body = memoryview(data)[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        try:
            dtype, npd = _FROM_ST[info["dtype"]]
            begin, end = info["data_offsets"]
            shape = [int(s) for s in info["shape"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: tensor '{name}' has an unsupported or malformed entry {info}") from None
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= begin <= end <= len(body)) or end - begin != count * np.dtype(npd).itemsize:
            raise ValueError(f"{path}: tensor '{name}' has data offsets {info['data_offsets']} that do not fit")
        arr = np.frombuffer(body[begin:end], dtype=npd).reshape(shape).copy()
        out[name] = Tensor._wrap(_C.Tensor.from_numpy(arr, dtype))
    return out, metadata
