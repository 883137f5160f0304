"""flow.linalg: torch.linalg's norms and products that compose from flow ops: vector_norm,
matrix_norm, norm, cross, vecdot, matmul, diagonal, multi_dot, matrix_power (n >= 0) and vander.

Note: design choices.
  - Norms are written out (amax/amin of |x| for +-inf, a count for 0, sums for the rest, sqrt of a
    sum of squares for 2), so they trace and fuse. float16/bfloat16 inputs are reduced in float32 and
    rounded once, as torch's CPU kernels accumulate them.
  - Decompositions (inv, det, slogdet, solve, svd, svdvals, qr, eig(h), cholesky, lstsq, pinv, ...)
    need factorization kernels flow does not have: accessing one raises AttributeError naming the
    missing piece (so hasattr() answers honestly), and matrix_norm's 'nuc', 2 and -2 (which need
    singular values) raise NotImplementedError. matrix_power needs inv for n < 0, so those raise too.
  - multi_dot multiplies in torch's order (the cheapest parenthesization), so it rounds as torch does.
"""
import builtins
import math
import numbers

from . import _creation as C
from . import _dtype as D
from . import _ops as F
from ._eager_fusion import fused_in_eager
from ._math import broadcast_shapes, promote_types
from ._math import diagonal as _diagonal
from ._ops import _normalize_dim, _out, _scalar, _tensor_arg, _type_name

__all__ = ["vector_norm", "matrix_norm", "norm", "cross", "vecdot", "matmul", "diagonal", "multi_dot",
           "matrix_power", "vander"]

_HALF = (D.float16, D.bfloat16)


def _float_input(fn, x):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                                  f"{x.dtype._torch_short}")


def _result_dtype(fn, x, dtype):
    if dtype is None:
        return x.dtype
    dt = D.to_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"{fn}: dtype should be floating point or complex. Got {dt._torch_short}")
    if promote_types(x.dtype, dt) is not dt:
        raise RuntimeError(f"{fn}: the dtype of the input ({x.dtype._torch_short}) should be convertible without "
                           f"narrowing to the specified dtype ({dt._torch_short})")
    return dt


def _dims_arg(x, dim):
    """dim (None, an int or a sequence) -> a sorted list of distinct normalized dims."""
    if dim is None:
        return list(range(x.ndim))
    ds = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    out = [_normalize_dim(d, builtins.max(x.ndim, 1)) for d in ds]
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out[0]} appears multiple times in the list of dims")
    return out


@fused_in_eager  # |a|, its powers, the sum and the root: one kernel eagerly, where op by op was up to four
def _vector_norm(a, ord, dims, keepdim):
    """The ord-norm of float tensor `a` over `dims` (a list; [] of a 0-dim tensor: all)."""
    dim = dims if dims else None
    if ord == math.inf:
        return F.amax(F.abs(a), dim if dim is not None else (), keepdim)
    if ord == -math.inf:
        return F.amin(F.abs(a), dim if dim is not None else (), keepdim)
    if ord == 0:
        return F._cast(F.sum(a != 0, dim, keepdim), a.dtype)
    if ord == 1:
        return F.sum(F.abs(a), dim, keepdim)
    if ord == 2:
        return F.sqrt(F.sum(a * a, dim, keepdim))
    return F.pow(F.sum(F.pow(F.abs(a), ord), dim, keepdim), 1.0 / ord)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of x as a vector over dim (all elements when None): max |x| (inf), min |x|
    (-inf), the count of nonzeros (0), (sum |x|^ord)^(1/ord) otherwise."""
    a = _tensor_arg("linalg.vector_norm", x, "x", 1)
    s = _scalar(ord)
    if s is None or isinstance(s, builtins.bool):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not {_type_name(ord)}")
    ord = builtins.float(s)
    _float_input("linalg.vector_norm", a)
    dt = _result_dtype("linalg.vector_norm", a, dtype)
    dims = _dims_arg(a, dim)
    if ord < 0 or ord == math.inf:
        reduced = [a.shape[d] for d in dims] if a.ndim else [1]
        if a.numel() == 0 and (dim is None or 0 in reduced):
            raise RuntimeError(f"linalg.vector_norm cannot compute the {_ord_str(ord)} norm on an empty tensor because "
                               f"the operation does not have an identity")
    wide = D.float32 if dt in _HALF else dt
    r = _vector_norm(a if a.dtype is wide else F._cast(a, wide), ord, dims if a.ndim else [], keepdim)
    if keepdim and dim is None and a.ndim:
        r = r.reshape([1] * a.ndim)
    return _out("linalg.vector_norm", out, r if r.dtype is dt else F._cast(r, dt))


def _ord_str(ord):
    return "inf" if ord == math.inf else "-inf" if ord == -math.inf else f"{ord:g}"


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The ord-norm of the matrices in dims: 'fro', inf / -inf (max / min row sum of |A|), 1 / -1
    (max / min column sum). 'nuc', 2 and -2 need singular values (not implemented)."""
    a = _tensor_arg("linalg.matrix_norm", A, "A", 1)
    if a.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dims = list(dim)
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dims)}")
    d0, d1 = _normalize_dim(dims[0], a.ndim), _normalize_dim(dims[1], a.ndim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dims[0]}, {dims[1]})")
    _float_input("linalg.matrix_norm", a)
    if isinstance(ord, str):
        if ord == "fro":
            return vector_norm(a, 2, (d0, d1), keepdim, dtype=dtype, out=out)
        if ord == "nuc":
            raise NotImplementedError("flow: linalg.matrix_norm(ord='nuc') needs the singular values "
                                      "(torch.linalg.svdvals), which flow does not implement")
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    s = _scalar(ord)
    if s is None or builtins.abs(s) not in (1, 2, math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if builtins.abs(s) == 2:
        raise NotImplementedError(f"flow: linalg.matrix_norm(ord={s:g}) needs the singular values "
                                  f"(torch.linalg.svdvals), which flow does not implement")
    if builtins.abs(s) == math.inf:
        d0, d1 = d1, d0  # the row sums (over the columns), then their extreme over the rows
    if a.shape[d0] == 0 or a.shape[d1] == 0:  # torch: an empty matrix has norm 0
        dt = _result_dtype("linalg.matrix_norm", a, dtype)
        shape = [(1 if keepdim else None) if k in (d0, d1) else n for k, n in enumerate(a.shape)]
        return _out("linalg.matrix_norm", out, C.zeros([n for n in shape if n is not None], dtype=dt,
                                                       device=a.device))
    sums = vector_norm(a, 1, d0, keepdim, dtype=dtype)
    if not keepdim and d0 < d1:
        d1 -= 1
    r = (F.amax if s > 0 else F.amin)(sums, d1, keepdim)
    return _out("linalg.matrix_norm", out, r)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """vector_norm or matrix_norm by dim (1 or 2 dims); with dim None, of the flattened input when
    ord is None, else of a 1-d (vector) or 2-d (matrix) input."""
    a = _tensor_arg("linalg.norm", A, "A", 1)
    if dim is not None:
        dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
        if len(dims) == 1:
            return vector_norm(a, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) == 2:
            return matrix_norm(a, "fro" if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {dims}")
    if ord is None:
        return vector_norm(a, 2, None, keepdim, dtype=dtype, out=out)
    if a.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{a.ndim}D.")
    if a.ndim == 1:
        if isinstance(ord, str):
            raise RuntimeError(f"linalg.vector_norm: ord must be a number. Got {ord}")
        return vector_norm(a, ord, 0, keepdim, dtype=dtype, out=out)
    return matrix_norm(a, ord, (0, 1), keepdim, dtype=dtype, out=out)


def cross(input, other, *, dim=-1, out=None):
    """The cross product of 3-vectors along dim (inputs of equal rank, broadcast)."""
    from ._math_more import _linalg_cross

    x = _tensor_arg("linalg.cross", input, "input", 1)
    y = _tensor_arg("linalg.cross", other, "other", 2)
    return _out("linalg.cross", out, _linalg_cross("linalg.cross", x, y, dim))


def vecdot(x, y, *, dim=-1, out=None):
    """sum(x * y) along dim (broadcast), as torch computes it (the product rounded, then summed)."""
    a = _tensor_arg("linalg.vecdot", x, "x", 1)
    b = _tensor_arg("linalg.vecdot", y, "y", 2)
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"linalg.vecdot: Expected a floating point or complex tensor as input. Got "
                                  f"{a.dtype._torch_short}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{a.dtype._torch_short} and y of type {b.dtype._torch_short} instead")
    shape = list(broadcast_shapes(a.shape, b.shape))
    d = _normalize_dim(dim, builtins.max(len(shape), 1))
    return _out("linalg.vecdot", out, F.sum(a * b, d))


matmul = F.matmul


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _diagonal(_tensor_arg("linalg.diagonal", A, "A", 1), offset, dim1, dim2)


def multi_dot(tensors, *, out=None):
    """The product of the matrices (in the cheapest order); the first may be a row vector and the last
    a column vector (1-d), which are squeezed from the result."""
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        _tensor_arg("multi_dot", t, "tensors", 1)
        ok = t.ndim in (1, 2) if i in (0, len(ts) - 1) else t.ndim == 2
        if not ok:
            which = "first" if i == 0 else "last" if i == len(ts) - 1 else None
            if which:
                raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got {t.ndim}D")
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype is not ts[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{ts[0].dtype._torch_short} and tensor {i} {t.dtype._torch_short}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = [ts[0].unsqueeze(0) if first_vec else ts[0]] + ts[1:-1] + [ts[-1].unsqueeze(1) if last_vec else ts[-1]]
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(ts[i].shape)} and "
                               f"{list(ts[i + 1].shape)} cannot be multiplied")
    r = _chain(mats)
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    return _out("multi_dot", out, r)


def _chain(mats):
    """The product of the matrices in torch's order (the cheapest parenthesization: its closed form
    for three, the matrix-chain dynamic program for more), so the roundings are torch's too."""
    from ._math_more import _matmul2d

    n = len(mats)
    if n == 2:
        return _matmul2d(mats[0], mats[1])
    if n == 3:
        a, b = mats[0].shape
        c, d = mats[2].shape
        if (a * c) * (b + d) > (b * d) * (a + c):
            return _matmul2d(mats[0], _matmul2d(mats[1], mats[2]))
        return _matmul2d(_matmul2d(mats[0], mats[1]), mats[2])
    p = [m.shape[0] for m in mats] + [mats[-1].shape[1]]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return _matmul2d(product(i, k), product(k + 1, j))

    return product(0, n - 1)


def matrix_power(A, n, *, out=None):
    """A^n for square matrices (batched) and n >= 0 by repeated squaring; A^0 is the identity."""
    a = _tensor_arg("linalg.matrix_power", A, "A", 1)
    if isinstance(n, builtins.bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"matrix_power(): argument 'n' (position 2) must be int, not {_type_name(n)}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        shape = f"{a.shape[-2]} by {a.shape[-1]}" if a.ndim >= 2 else f"{a.ndim}D"
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {shape} matrices")
    if n < 0:
        raise NotImplementedError("flow: linalg.matrix_power with n < 0 needs the matrix inverse (linalg.inv), "
                                  "which flow does not implement")
    from ._math_more import _matmul2d

    k = a.shape[-1]
    if n == 0:
        eye = C.eye(k, dtype=a.dtype, device=a.device)
        return _out("matrix_power", out, eye.expand(list(a.shape)).clone())
    if n == 3:  # (torch's special case, so the roundings match)
        return _out("matrix_power", out, _matmul2d(_matmul2d(a, a), a))
    result, base, m = None, a, builtins.int(n)
    while True:
        if m & 1:
            result = base if result is None else _matmul2d(result, base)
        m >>= 1
        if not m:
            break
        base = _matmul2d(base, base)
    return _out("matrix_power", out, result if result is not a else a.clone())


def vander(x, *, N=None):
    """The Vandermonde matrices of x's last dim: powers 0 .. N-1 along a new last dim."""
    from ._math_more import _vander_cols

    t = _tensor_arg("linalg.vander", x, "x", 1)
    if t.dtype is D.bool_ or t.dtype in _HALF:
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer tensors, but got "
                           f"{t.dtype._torch_short}")
    t = t.reshape(1) if t.ndim == 0 else t
    n = t.shape[-1] if N is None else builtins.int(N)
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    return _vander_cols(t, n)


# What torch.linalg has and flow does not: factorizations and what is built on them.
_MISSING = {"inv", "inv_ex", "det", "slogdet", "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "qr",
            "eig", "eigh", "eigvals", "eigvalsh", "cholesky", "cholesky_ex", "lstsq", "pinv", "matrix_rank", "cond",
            "matrix_exp", "tensorinv", "tensorsolve", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "ldl_factor",
            "ldl_factor_ex", "ldl_solve", "householder_product"}


def __getattr__(name):
    if name in _MISSING:
        raise AttributeError(f"flow.linalg.{name} is not implemented: flow has no matrix factorization kernels "
                             f"(LU, QR, SVD, eigen, Cholesky) yet")
    raise AttributeError(f"module 'flow.linalg' has no attribute '{name}'")
