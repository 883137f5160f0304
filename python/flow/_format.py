"""repr of a concrete tensor, close to torch's: ``tensor([1.5000, 2.0000], dtype=flow.float16)``.

Floats print with 4 decimals (or ``1.`` when every finite value is integral, or scientific
notation when magnitudes span more than 1e3 or exceed 1e8), right-aligned to a common width, with
numpy's summarization (``...``) for large tensors. The dtype is shown unless it is a default one
(float32, int64, bool), as torch does.
"""
import numpy as np

from . import _dtype as D

_DEFAULT_DTYPES = ("float32", "int64", "bool")


def _float_formatter(values):
    finite = values[np.isfinite(values)].astype(np.float64)
    if finite.size == 0:
        return lambda v: _nonfinite(v)
    absf = np.abs(finite)
    nonzero = absf[absf > 0]
    integral = bool(np.all(finite == np.round(finite)))
    sci = False
    if nonzero.size:
        mx, mn = nonzero.max(), nonzero.min()
        sci = mx / mn > 1000.0 or mx > 1e8 or mn < 1e-4
    if integral and not sci:
        fmt = "{:.0f}."
    elif sci:
        fmt = "{:.4e}"
    else:
        fmt = "{:.4f}"

    def f(v):
        return _nonfinite(v) if not np.isfinite(v) else fmt.format(v)

    return f


def _nonfinite(v):
    if np.isnan(v):
        return "nan"
    return "inf" if v > 0 else "-inf"


def format_tensor(t):
    dt = t.dtype
    arr = t._numpy_f32_or_native()
    # torch names every dtype but float32 on an empty tensor (its values cannot show int or bool)
    implied = dt.name == "float32" or (dt.name in _DEFAULT_DTYPES and arr.size > 0)
    suffix = "" if implied else f", dtype={dt!r}"
    if t._c.device != "cpu":
        # torch's spelling and order (device, then dtype); flow runs on the current device (index 0).
        suffix = f", device='{t.device.type}:{t.device.index or 0}'" + suffix
    if arr.size == 0:
        body = "[]"
        if arr.ndim > 1:
            suffix = f", size={tuple(arr.shape)}" + suffix
    else:
        if dt.is_floating_point:
            fmt = _float_formatter(arr.reshape(-1) if arr.size <= 1000 else arr.reshape(-1)[:1000])
            width = max(len(fmt(v)) for v in arr.reshape(-1)[:1000])
            formatter = {"float_kind": lambda v: fmt(v).rjust(width)}
        elif dt is D.bool_:
            width = 5 if (arr.reshape(-1)[:1000] == False).any() else 4  # noqa: E712
            formatter = {"bool": lambda v: ("True" if v else "False").rjust(width)}
        else:
            width = max(len(str(v)) for v in arr.reshape(-1)[:1000])
            formatter = {"int": lambda v: str(v).rjust(width)}
        body = np.array2string(arr, separator=", ", prefix="tensor(", formatter=formatter, threshold=1000,
                               edgeitems=3, max_line_width=80)
    return f"tensor({body}{suffix})"
