"""dtypes and devices, named and printed as torch's (``flow.float32`` prints as ``flow.float32``).

A dtype object carries the core's name (``"float32"``), the numpy dtype its data travels as
(bfloat16 travels as uint16 bit patterns) and its torch-style properties. ``to_dtype`` accepts a
flow dtype, a name, a numpy dtype or a torch dtype, so ported code can pass any of them.
"""
import numpy as np

__all__ = ["dtype", "device", "Size", "float32", "float16", "bfloat16", "float64", "int32", "int64", "int16", "int8",
           "uint8", "bool_"]


class dtype:
    __slots__ = ("name", "itemsize", "is_floating_point", "is_signed", "np_dtype", "_torch_short")

    def __init__(self, name, itemsize, is_floating_point, np_dtype, torch_short):
        self.name = name  # the core's name, as torch's str(dtype) without the prefix
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point
        self.is_signed = name not in ("bool", "uint8")
        self.np_dtype = np.dtype(np_dtype)  # the numpy dtype the data travels as
        self._torch_short = torch_short  # "Float", "Half", ... (torch's ScalarType names)

    def __repr__(self):
        return "flow." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (to_dtype, (self.name,))

    def to_real(self):
        return self


float32 = dtype("float32", 4, True, np.float32, "Float")
float16 = dtype("float16", 2, True, np.float16, "Half")
bfloat16 = dtype("bfloat16", 2, True, np.uint16, "BFloat16")
float64 = dtype("float64", 8, True, np.float64, "Double")
int32 = dtype("int32", 4, False, np.int32, "Int")
int64 = dtype("int64", 8, False, np.int64, "Long")
int16 = dtype("int16", 2, False, np.int16, "Short")
int8 = dtype("int8", 1, False, np.int8, "Char")
uint8 = dtype("uint8", 1, False, np.uint8, "Byte")
bool_ = dtype("bool", 1, False, np.bool_, "Bool")

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "half": float16, "double": float64, "int": int32, "long": int64,
                 "short": int16, "bool_": bool_})


def from_name(name):
    return _BY_NAME[name]


def is_torch_dtype(x):
    """A torch.dtype, recognized without importing torch."""
    return (type(x).__module__ or "").startswith("torch") and type(x).__name__ == "dtype"


def to_dtype(x, what="dtype"):
    """A flow dtype from a flow dtype, a name, a numpy dtype/type or a torch dtype."""
    if isinstance(x, dtype):
        return x
    if isinstance(x, str):
        key = x[len("flow."):] if x.startswith("flow.") else x[len("torch."):] if x.startswith("torch.") else x
        if key in _BY_NAME:
            return _BY_NAME[key]
        raise TypeError(f"flow: unknown {what} '{x}'")
    if is_torch_dtype(x):
        return to_dtype(str(x), what)
    if x is bool:
        return bool_
    if x is int:
        return int64
    if x is float:
        return float32
    try:
        nd = np.dtype(x)
    except TypeError:
        raise TypeError(f"flow: {what} must be a flow dtype, not {type(x).__name__}") from None
    for d in (bool_, uint8, int8, int16, int32, int64, float16, float32, float64):
        if d.np_dtype == nd:
            return d
    raise TypeError(f"flow: numpy dtype {nd} has no flow dtype (supported: {', '.join(d.name for d in ALL)})")


def promote_numpy_default(nd):
    """The flow dtype for data built from Python values through numpy (torch's defaults:
    float -> float32, int -> int64, bool -> bool)."""
    if nd.kind == "f":
        return float32
    if nd.kind in "iu":
        return int64
    if nd.kind == "b":
        return bool_
    raise TypeError(f"flow: can't build a tensor from values of numpy type {nd}")


class device:
    """flow.device('cpu') / flow.device('cuda'): where a tensor lives (CUDA: the current device)."""

    __slots__ = ("type", "index")

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if ":" in type:
            type, idx = type.split(":", 1)
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {type}")
        self.type = type
        self.index = index

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


CPU = device("cpu")


class memory_format:
    """flow.contiguous_format / channels_last / preserve_format: a tensor's dim order in memory (4-d
    channels_last is NHWC strides for an NCHW shape), as torch's. flow's compiler picks layouts
    itself (channels_last for half-precision convolutions on CUDA); a channels_last input or model
    is accepted and read through its strides."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "flow." + self.name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
preserve_format = memory_format("preserve_format")


class Size(tuple):
    """A tensor's shape: a tuple that prints as flow.Size([2, 3])."""

    def __repr__(self):
        return f"flow.Size([{', '.join(str(s) for s in self)}])"

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


# bfloat16 <-> float32 conversions over numpy (bits are uint16).
def f32_to_bf16_bits(a):
    """Round-to-nearest-even float32 -> bfloat16 bit patterns; NaN stays a (quiet) NaN."""
    a = np.array(a, dtype=np.float32, order="C")  # (ascontiguousarray would make 0-dim 1-dim)
    u = np.atleast_1d(a.view(np.uint32).astype(np.uint64))  # (a 0-dim result would be a numpy scalar)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.atleast_1d(a))
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r.reshape(a.shape)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)
CUDA = device("cuda")
