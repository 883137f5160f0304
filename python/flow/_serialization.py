"""flow.save / flow.load for PyTorch checkpoints: torch's zip format, read and written without torch.

Note: a ported script's second line is ``model.load_state_dict(torch.load("model.pth"))``, so
``flow.load`` reads the files ``torch.save`` writes (the zip format, torch >= 1.6), and
``flow.save`` writes files ``torch.load`` reads. The format: a zip archive whose entries sit under
one folder (``<name>/``): ``data.pkl``, a pickle (protocol 2) of the saved object in which each
tensor is ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` and each storage
a persistent id ``("storage", torch.<Type>Storage, key, location, numel)`` whose bytes are the
entry ``data/<key>`` (little-endian unless ``byteorder`` says otherwise), plus ``version``.

Reading is always *weights only* (torch's ``weights_only=True``, its default since 2.6): the
unpickler builds tensors, containers, numbers, strings, dtypes, devices and sizes, and refuses any
other class with an error that names it, since unpickling arbitrary classes runs arbitrary code.
Tensors that share a storage in the file share one in flow (views over the storage, as torch
loads them). ``flow.save`` writes each distinct tensor as its own storage (views of one tensor are
not merged into one storage; the file is larger then, never different in values).
"""
import codecs
import collections
import io
import os
import pickle
import zipfile

import numpy as np

from . import _C
from . import _dtype as D
from ._tensor import Tensor

# torch storage class name -> flow dtype (flow has no complex or quantized tensors)
_STORAGE_DTYPES = {"FloatStorage": D.float32, "DoubleStorage": D.float64, "HalfStorage": D.float16,
                   "BFloat16Storage": D.bfloat16, "LongStorage": D.int64, "IntStorage": D.int32,
                   "ShortStorage": D.int16, "CharStorage": D.int8, "ByteStorage": D.uint8, "BoolStorage": D.bool_}
_STORAGE_OF = {d.name: s for s, d in _STORAGE_DTYPES.items()}
_UNSUPPORTED_STORAGES = {"ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
                         "QUInt8Storage": "quint8", "QInt8Storage": "qint8", "QInt32Storage": "qint32"}
# torch dtype global name ("float32", "half", ...) -> flow dtype
_TORCH_DTYPES = {d.name: d for d in D.ALL}
_TORCH_DTYPES.update({"float": D.float32, "double": D.float64, "half": D.float16, "long": D.int64, "int": D.int32,
                      "short": D.int16})

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class _StorageType:
    """What the unpickler returns for ``torch.<Type>Storage``."""

    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGE_DTYPES.get(name)


class _Storage:
    """A storage read from the archive: a flat flow tensor. ``cpu()``/``cuda()`` let a
    ``map_location`` callable (``lambda storage, loc: storage.cuda()``) move it, as torch's do."""

    def __init__(self, flat):
        self.flat = flat

    def cpu(self):
        return _Storage(self.flat.cpu())

    def cuda(self, device=None, non_blocking=False):
        return _Storage(self.flat.cuda(device))

    def size(self):
        return self.flat.numel()

    def __len__(self):
        return self.flat.numel()


def _rebuild_tensor(storage, storage_offset, size, stride, *unused):
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError(f"flow.load: a tensor's storage is a {type(storage).__name__}, not a storage")
    return storage.flat.as_strided(tuple(size), tuple(stride), int(storage_offset))


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, *unused):
    t = _rebuild_tensor(storage, storage_offset, size, stride)
    if t.dtype is not dtype:
        raise pickle.UnpicklingError(f"flow.load: a {dtype} tensor over a {t.dtype} storage")
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    from .nn import Parameter

    return Parameter(data, requires_grad=requires_grad)


def _torch_device(kind, index=None):
    return D.device(kind if index is None else f"{kind}:{index}")


def _allowed_globals():
    from collections import OrderedDict

    table = {
        ("collections", "OrderedDict"): OrderedDict,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
        ("torch", "Size"): D.Size,
        ("torch", "device"): _torch_device,
        ("builtins", "set"): set,
        ("builtins", "complex"): complex,
        ("_codecs", "encode"): codecs.encode,
        ("builtins", "frozenset"): frozenset,
    }
    for name, dt in _TORCH_DTYPES.items():
        table[("torch", name)] = dt
    return table


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, source, read_storage):
        super().__init__(file)
        self._source = source
        self._read_storage = read_storage
        self._globals = _allowed_globals()

    def find_class(self, module, name):
        if module == "__builtin__":  # protocol 2 names builtins as Python 2 did
            module = "builtins"
        found = self._globals.get((module, name))
        if found is not None:
            return found
        if module == "torch" and name.endswith("Storage"):
            if name in _STORAGE_DTYPES:
                return _StorageType(name)
            dt = _UNSUPPORTED_STORAGES.get(name)
            if dt is not None:
                raise TypeError(f"flow.load: {self._source} holds a torch.{dt} tensor, and flow has no {dt} dtype "
                                f"(flow's dtypes: {', '.join(d.name for d in D.ALL)}); convert it with torch first")
        raise pickle.UnpicklingError(
            f"flow.load: {self._source} holds a {module}.{name}, which flow does not unpickle: flow reads tensors, "
            "numbers, strings, dtypes and containers of them (torch's weights_only=True). Save the model's "
            "state_dict() rather than the model object, and load it with model.load_state_dict(flow.load(path))")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"flow.load: {self._source} has an unknown persistent id {pid!r}")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _StorageType) or storage_type.dtype is None:
            raise pickle.UnpicklingError(f"flow.load: {self._source} has a storage of unknown type {storage_type!r}")
        return self._read_storage(storage_type.dtype, str(key), str(location), int(numel))


def _location_mapper(map_location):
    """A function from the saved location ("cpu", "cuda:0") to where the storage goes, following
    torch.load's ``map_location``: None (where it was saved), a device or string, a dict of
    locations, or a callable ``(storage, location) -> storage``."""
    if map_location is None:
        return lambda storage, loc: _to_location(storage, loc)
    if isinstance(map_location, dict):
        table = {str(k): str(v) for k, v in map_location.items()}
        return lambda storage, loc: _to_location(storage, table.get(loc, loc))
    if isinstance(map_location, (str, D.device)) or type(map_location).__name__ == "device":
        target = str(map_location)
        return lambda storage, loc: _to_location(storage, target)
    if callable(map_location):
        def call(storage, loc):
            moved = map_location(storage, loc)
            return storage if moved is None else moved
        return call
    raise TypeError(f"flow.load: map_location should be a device, a string, a dict or a callable, "
                    f"not {type(map_location).__name__}")


def _to_location(storage, loc):
    if loc == "cpu":
        return storage
    if loc.startswith("cuda"):
        if not _C.cuda_is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but flow.cuda.is_available() is "
                               "False. If you are running on a CPU-only machine, please use flow.load with "
                               "map_location='cpu' to map your storages to the CPU.")
        return storage.cuda(loc)
    raise RuntimeError(f"flow.load: don't know how to restore data location {loc!r}")


def _check_not_legacy(head, source):
    """Files from torch < 1.6 (or ``_use_new_zipfile_serialization=False``) start with a pickled
    magic number rather than a zip header."""
    try:
        first = pickle.loads(head)
    except Exception:
        first = None
    if first == _LEGACY_MAGIC:
        raise RuntimeError(f"flow.load: {source} was written in torch's legacy format (torch < 1.6 or "
                           "_use_new_zipfile_serialization=False), which flow does not read; load it with torch and "
                           "torch.save it again")
    raise RuntimeError(f"flow.load: {source} is not a torch checkpoint (not a zip archive)")


def load_checkpoint(f, map_location=None):
    """Reads a ``torch.save`` file (path or binary file object) into flow tensors."""
    source = repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else "the file"
    if isinstance(f, (str, os.PathLike)):
        if not os.path.exists(f):
            raise FileNotFoundError(f"flow.load: {source}: no such file or directory (neither a checkpoint file "
                                    "nor a flow bundle)")
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    if not zipfile.is_zipfile(io.BytesIO(data)):
        _check_not_legacy(data[:64], source)
    archive = zipfile.ZipFile(io.BytesIO(data))
    pkls = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
    if len(pkls) != 1:
        raise RuntimeError(f"flow.load: {source} is a zip archive but not a torch checkpoint (no data.pkl)")
    prefix = pkls[0][: -len("data.pkl")]
    big_endian = False
    if prefix + "byteorder" in archive.namelist():
        big_endian = archive.read(prefix + "byteorder").strip() == b"big"
    place = _location_mapper(map_location)
    storages = {}

    def read_storage(dtype, key, location, numel):
        if key not in storages:
            try:
                raw = archive.read(f"{prefix}data/{key}")
            except KeyError:
                raise RuntimeError(f"flow.load: {source} has no data for storage {key}") from None
            np_dtype = dtype.np_dtype.newbyteorder(">") if big_endian else dtype.np_dtype
            if len(raw) < numel * np_dtype.itemsize:
                raise RuntimeError(f"flow.load: {source}: storage {key} holds {len(raw)} bytes, "
                                   f"fewer than {numel} {dtype} elements")
            arr = np.frombuffer(raw, dtype=np_dtype, count=numel).astype(dtype.np_dtype)
            flat = Tensor._wrap(_C.Tensor.from_numpy(arr, dtype.name))
            storages[key] = place(_Storage(flat), location)
        return storages[key]

    return _Unpickler(io.BytesIO(archive.read(pkls[0])), source, read_storage).load()


# ---- writing -------------------------------------------------------------------------------------

class _Global:
    """A ``module.name`` reference written as pickle's GLOBAL opcode without importing the module
    (torch need not be installed to write a file torch reads)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle asks reduce functions to be callable; this one is only written
        raise TypeError(f"{self.module}.{self.name} is a reference written into a checkpoint")


class _StorageRef:
    def __init__(self, key, dtype, location, numel):
        self.key, self.dtype, self.location, self.numel = key, dtype, location, numel


_PLAIN_TYPES = {type(None), bool, int, float, complex, str, bytes, list, tuple, dict, collections.OrderedDict,
                set, frozenset, _Global, _StorageRef, D.dtype}
# What the reductions of those types refer to (protocol 2 writes bytes as codecs.encode(str, "latin1")).
_PLAIN_REFERENCES = {collections.OrderedDict, set, frozenset, complex, codecs.encode}


class _Writer(pickle._Pickler):
    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, blobs):
        super().__init__(file, protocol=2)
        self._blobs = blobs  # [(key, bytes)], filled as tensors are met
        self._global_refs = {}

    def _ref(self, module, name):
        return self._global_refs.setdefault((module, name), _Global(module, name))

    def _save_global_ref(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = _save_global_ref

    def _save_dtype(self, obj):
        self.save(self._ref("torch", obj.name))

    dispatch[D.dtype] = _save_dtype

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", self._ref("torch", _STORAGE_OF[obj.dtype]), obj.key, obj.location, obj.numel)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return self._reduce_tensor(obj)
        if isinstance(obj, D.device):
            return (self._ref("torch", "device"), (str(obj),))
        if isinstance(obj, D.Size):
            return (self._ref("torch", "Size"), (tuple(obj),))
        if type(obj) not in _PLAIN_TYPES and not any(obj is r for r in _PLAIN_REFERENCES):
            raise pickle.PicklingError(
                f"flow.save writes tensors, numbers, strings, dtypes and containers of them (what torch.load reads "
                f"with weights_only=True); got a {type(obj).__module__}.{type(obj).__qualname__}. Save "
                "model.state_dict() rather than a model, convert numpy values with float()/int()/flow.tensor(), "
                "or flow.save a model compiled with flow.jit to write a bundle directory")
        return NotImplemented

    def _reduce_tensor(self, t):
        t._need_data("flow.save")
        c = t._c
        location = "cpu" if c.device == "cpu" else "cuda:0"
        host = c if c.device == "cpu" else c.to_device("cpu")
        raw = np.ascontiguousarray(host.numpy_view()).astype(t.dtype.np_dtype.newbyteorder("<"), copy=False)
        key = str(len(self._blobs))
        self._blobs.append((key, raw.tobytes()))
        shape = tuple(int(s) for s in t.shape)
        stride, acc = [], 1
        for s in reversed(shape):
            stride.append(acc)
            acc *= max(s, 1)
        storage = _StorageRef(key, t.dtype.name, location, int(raw.size))
        args = (storage, 0, shape, tuple(reversed(stride)), bool(getattr(t, "requires_grad", False)),
                collections.OrderedDict())
        return (self._ref("torch._utils", "_rebuild_tensor_v2"), args)


_ALIGNMENT = 64  # torch aligns each storage's bytes to 64 in the file (for mmap loading)


def _write_entry(archive, fp, name, data):
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    # Pad the local header's extra field so the data starts on a 64-byte boundary, as torch does.
    start = fp.tell() + 30 + len(name.encode())
    pad = -(start + 4) % _ALIGNMENT
    info.extra = b"FB" + pad.to_bytes(2, "little") + b"Z" * pad
    archive.writestr(info, data)


def save_checkpoint(obj, f):
    """Writes ``obj`` (tensors, numbers, strings, dtypes and containers of them) as ``torch.save``
    does, to a path or a binary file object."""
    buf, blobs = io.BytesIO(), []
    _Writer(buf, blobs).dump(obj)
    name = "archive"
    if isinstance(f, (str, os.PathLike)):
        stem = os.path.splitext(os.path.basename(os.fspath(f)))[0]
        name = stem if stem.isidentifier() else "archive"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        _write_entry(archive, out, f"{name}/data.pkl", buf.getvalue())
        _write_entry(archive, out, f"{name}/.format_version", b"1")
        _write_entry(archive, out, f"{name}/.storage_alignment", str(_ALIGNMENT).encode())
        _write_entry(archive, out, f"{name}/byteorder", b"little")
        for key, raw in blobs:
            _write_entry(archive, out, f"{name}/data/{key}", raw)
        _write_entry(archive, out, f"{name}/version", b"3\n")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(out.getvalue())
    else:
        f.write(out.getvalue())


# ---- flow.save / flow.load ------------------------------------------------------------------------

def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """torch.save: writes ``obj`` (a state dict, a tensor, or containers of tensors, numbers and
    strings) to the file ``f`` in torch's format, which ``torch.load`` and ``flow.load`` read.

    A model compiled with ``flow.jit`` (called at least once) is written instead as a bundle
    directory (see ``flow._bundle``): its graphs, weights, tuning records and kernels."""
    from . import _bundle

    if _bundle.is_compiled_model(obj):
        return _bundle.save(obj, f)
    if pickle_module is not None or pickle_protocol != 2 or not _use_new_zipfile_serialization:
        raise TypeError("flow.save writes torch's default format only (the zip format, pickle protocol 2); "
                        "pickle_module, pickle_protocol and _use_new_zipfile_serialization cannot be changed")
    save_checkpoint(obj, f)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, target=None,
         **pickle_load_args):
    """torch.load: reads a file written by ``torch.save`` or ``flow.save`` (tensors come back as
    flow tensors, on ``map_location`` if given, else where they were saved); or, for a bundle
    directory written by ``flow.save(compiled_model, dir)``, the loaded model (``target`` picks the
    device to compile it for).

    Always reads weights only, whatever ``weights_only`` says: classes other than tensors,
    containers, numbers, strings, dtypes, devices and sizes are refused with an error naming them.
    ``mmap`` is accepted and the file is read into memory."""
    from . import _bundle

    if isinstance(f, (str, os.PathLike)) and os.path.isdir(f):
        return _bundle.load(f, target=target)
    if target is not None:
        raise TypeError("flow.load: target= applies to a bundle directory; use map_location= for a checkpoint file")
    if pickle_module is not None or pickle_load_args:
        raise TypeError("flow.load reads weights only; pickle_module and pickle arguments are not supported")
    return load_checkpoint(f, map_location)
