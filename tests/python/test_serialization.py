"""flow.load reads what torch.save writes, and torch.load reads what flow.save writes
(python/flow/_serialization.py): every dtype, edge shapes, views and shared storages, containers
and plain values, map_location, file objects, a model's state dict end to end, and clear errors
for what flow does not read (pickled classes, the legacy format, dtypes flow lacks)."""
import io
import pickle
import zipfile

import numpy as np
import pytest
import torch

import flow
import flow.nn as fnn
from conftest import ALL_DTYPES, assert_same, make, to_torch

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 0, 4), (2, 3, 4)]


def _torch_file(obj, tmp_path, name="ckpt.pth"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


def _rewrite(path, edit):
    """Rewrites a checkpoint's zip entries through edit(name, bytes) -> bytes."""
    with zipfile.ZipFile(path) as z:
        entries = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries:
            z.writestr(name, edit(name, data))


def _assert_bit_equal(flow_t, torch_t, key=""):
    assert isinstance(flow_t, flow.Tensor), (key, type(flow_t))
    got = to_torch(flow_t)
    assert got.dtype == torch_t.dtype and got.shape == torch_t.shape, (key, got.dtype, got.shape)
    if torch_t.dtype.is_floating_point:  # bit patterns, so NaN payloads and -0.0 count too
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[torch_t.element_size()]
        assert torch.equal(got.contiguous().view(width), torch_t.contiguous().view(width)), key
    else:
        assert torch.equal(got, torch_t), key


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_torch_files_load_bit_exact_in_every_dtype_and_shape(dtype, gen, tmp_path):
    state = {f"t{i}": make(shape, dtype, gen, special=True) for i, shape in enumerate(SHAPES)}
    loaded = flow.load(_torch_file(state, tmp_path))
    assert list(loaded) == list(state)
    for k, t in state.items():
        _assert_bit_equal(loaded[k], t, k)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_flow_files_load_in_torch_bit_exact(dtype, gen, tmp_path):
    state = {f"t{i}": make(shape, dtype, gen, special=True) for i, shape in enumerate(SHAPES)}
    flow_state = {k: flow.as_tensor(v) for k, v in state.items()}
    flow_state["view"] = flow.as_tensor(make((4, 6), dtype, gen)).t()[1:, ::2]  # saved as its values
    flow.save(flow_state, tmp_path / "f.pth")
    back = torch.load(tmp_path / "f.pth", weights_only=True)
    for k, t in flow_state.items():
        assert back[k].is_contiguous()
        _assert_bit_equal(t, back[k], k)
    again = flow.load(tmp_path / "f.pth")  # and flow reads its own files
    for k, t in back.items():
        _assert_bit_equal(again[k], t, k)


def test_views_and_shared_storages_load_as_views(gen, tmp_path):
    base = make((4, 6), torch.float32, gen)
    state = {"base": base, "t": base.t(), "row": base[2], "cols": base[:, 1::2], "other": make((3,), torch.float32, gen)}
    loaded = flow.load(_torch_file(state, tmp_path))
    for k, t in state.items():
        _assert_bit_equal(loaded[k], t, k)
        assert tuple(loaded[k].stride()) == t.stride() and loaded[k].storage_offset() == t.storage_offset(), k
    loaded["base"][2, 1] = 100.0  # one storage in the file is one storage in flow
    assert loaded["row"][1].item() == 100.0 and loaded["t"][1, 2].item() == 100.0
    assert loaded["cols"][2, 0].item() == 100.0
    assert loaded["other"].eq(flow.as_tensor(state["other"])).all().item()


def test_containers_and_plain_values_round_trip(gen, tmp_path):
    obj = {"epoch": 7, "lr": 0.125, "name": "resnet", "flags": [True, None], "shape": torch.Size([2, 3]),
           "dtype": torch.bfloat16, "device": torch.device("cpu"), "pair": (1, "x"), "raw": b"\x00\xff",
           "set": {3, 4}, "z": 1 + 2j, "nested": {"w": make((2, 2), torch.float32, gen), "steps": [make((3,), torch.int64, gen)]}}
    loaded = flow.load(_torch_file(obj, tmp_path))
    for k in ("epoch", "lr", "name", "flags", "pair", "raw", "set", "z"):
        assert loaded[k] == obj[k], k
    assert loaded["shape"] == flow.Size([2, 3]) and isinstance(loaded["shape"], flow.Size)
    assert loaded["dtype"] is flow.bfloat16 and loaded["device"] == flow.device("cpu")
    _assert_bit_equal(loaded["nested"]["w"], obj["nested"]["w"])
    _assert_bit_equal(loaded["nested"]["steps"][0], obj["nested"]["steps"][0])
    flow.save(loaded, tmp_path / "back.pth")
    back = torch.load(tmp_path / "back.pth", weights_only=True)
    for k in ("epoch", "lr", "name", "flags", "pair", "raw", "set", "z", "shape", "dtype", "device"):
        assert back[k] == obj[k], k
    assert isinstance(back["shape"], torch.Size)
    assert torch.equal(back["nested"]["w"], obj["nested"]["w"])


def test_parameters_and_file_objects(gen, tmp_path):
    p = torch.nn.Parameter(make((3, 2), torch.float32, gen))
    buf = io.BytesIO()
    torch.save({"p": p}, buf)
    buf.seek(0)
    loaded = flow.load(buf)
    assert isinstance(loaded["p"], fnn.Parameter)
    _assert_bit_equal(loaded["p"], p.detach())
    out = io.BytesIO()
    flow.save(loaded, out)
    out.seek(0)
    assert torch.equal(torch.load(out, weights_only=True)["p"], p.detach())


def test_map_location_forms(gen, tmp_path):
    t = make((2, 3), torch.float32, gen)
    path = _torch_file({"t": t}, tmp_path)
    for where in ("cpu", flow.device("cpu"), torch.device("cpu"), {"cpu": "cpu"}, lambda storage, loc: storage):
        _assert_bit_equal(flow.load(path, map_location=where)["t"], t, repr(where))
    with pytest.raises(TypeError, match="map_location"):
        flow.load(path, map_location=3)


def _as_if_saved_on_cuda(path):
    """A torch checkpoint rewritten as if its storages had been saved from cuda:0 (torch on a CPU
    machine cannot write one): pickle has no absolute offsets, so the location string is replaced."""
    old, new = b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0"
    _rewrite(path, lambda name, data: data.replace(old, new) if name.endswith("data.pkl") else data)


def test_cuda_checkpoints(gen, tmp_path):
    t = make((5,), torch.float32, gen)
    path = _torch_file({"t": t}, tmp_path)
    _as_if_saved_on_cuda(path)
    _assert_bit_equal(flow.load(path, map_location="cpu")["t"], t)
    _assert_bit_equal(flow.load(path, map_location={"cuda:0": "cpu"})["t"], t)
    if not flow.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location='cpu'"):
            flow.load(path)


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="no CUDA device")
def test_checkpoints_on_the_gpu(gen, tmp_path):
    t = make((4, 3), torch.float16, gen)
    path = _torch_file({"t": t, "v": t[1:]}, tmp_path)
    on_gpu = flow.load(path, map_location="cuda")
    assert on_gpu["t"].device.type == "cuda" and on_gpu["v"].device.type == "cuda"
    assert_same(on_gpu["v"].cpu(), t[1:])
    _as_if_saved_on_cuda(path)
    assert flow.load(path)["t"].device.type == "cuda"  # where it was saved
    assert flow.load(path, map_location=lambda s, loc: s.cuda())["t"].device.type == "cuda"
    flow.save({"g": on_gpu["t"]}, tmp_path / "g.pth")
    with zipfile.ZipFile(tmp_path / "g.pth") as z:
        pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
        assert b"cuda:0" in z.read(pkl)  # recorded where it lived, as torch does
    assert torch.equal(torch.load(tmp_path / "g.pth", map_location="cpu", weights_only=True)["g"], t)


def test_big_endian_files(gen, tmp_path):
    state = {"f": make((3, 4), torch.float32, gen), "l": make((5,), torch.int64, gen),
             "h": make((2,), torch.bfloat16, gen)}
    path = _torch_file(state, tmp_path)
    # torch gives storage keys out in the order it meets the tensors
    sizes = {f"data/{key}": t.element_size() for key, t in enumerate(state.values())}

    def swap(name, data):
        if name.endswith("/byteorder"):
            return b"big"
        for suffix, width in sizes.items():
            if name.endswith("/" + suffix):
                return np.frombuffer(data, dtype=f"u{width}").byteswap().tobytes()
        return data

    _rewrite(path, swap)
    loaded = flow.load(path)
    for k, t in state.items():
        _assert_bit_equal(loaded[k], t, k)


class _TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


class _FlowNet(fnn.Module):
    def __init__(self):
        super().__init__()
        self.conv = fnn.Conv2d(3, 8, 3, padding=1)
        self.bn = fnn.BatchNorm2d(8)
        self.fc = fnn.Linear(8, 5)

    def forward(self, x):
        return self.fc(flow.relu(self.bn(self.conv(x))).mean((2, 3)))


def test_a_torch_models_state_dict_runs_in_flow(gen, tmp_path):
    tm = _TorchNet()
    with torch.no_grad():  # trained-looking batch-norm statistics
        tm.bn.running_mean.copy_(make((8,), torch.float32, gen))
        tm.bn.running_var.copy_(make((8,), torch.float32, gen, low=0.5, high=2.0))
    tm.eval()
    path = _torch_file({"model": tm.state_dict(), "epoch": 90}, tmp_path)
    fm = _FlowNet()
    fm.load_state_dict(flow.load(path, map_location="cpu", weights_only=True)["model"])
    fm.eval()
    x = make((2, 3, 9, 9), torch.float32, gen)
    expected = tm(x).detach()
    assert_same(fm(flow.as_tensor(x)), expected, atol=1e-5)
    assert_same(flow.jit(fm)(flow.as_tensor(x)), expected, atol=1e-5)
    flow.save(fm.state_dict(), tmp_path / "flow.pth")  # and back into torch
    tm2 = _TorchNet().eval()
    tm2.load_state_dict(torch.load(tmp_path / "flow.pth", weights_only=True))
    assert torch.equal(tm2(x), tm(x))


def test_what_flow_does_not_read_is_a_clear_error(tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pth")  # a pickled class, not weights
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.linear.Linear.*state_dict"):
        flow.load(tmp_path / "module.pth")
    torch.save({"c": torch.zeros(3, dtype=torch.complex64)}, tmp_path / "c64.pth")
    with pytest.raises(TypeError, match="torch.complex64 tensor.*no complex64 dtype"):
        flow.load(tmp_path / "c64.pth")
    torch.save({"a": torch.ones(2)}, tmp_path / "legacy.pth", _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="legacy format"):
        flow.load(tmp_path / "legacy.pth")
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint at all")
    with pytest.raises(RuntimeError, match="not a torch checkpoint"):
        flow.load(tmp_path / "junk.pth")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(RuntimeError, match="no data.pkl"):
        flow.load(tmp_path / "other.zip")
    path = _torch_file({"a": torch.ones(4)}, tmp_path, "short.pth")
    _rewrite(path, lambda name, data: data[:4] if name.endswith("data/0") else data)
    with pytest.raises(RuntimeError, match="fewer than 4"):
        flow.load(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        flow.load(tmp_path / "missing.pth")


def test_what_flow_does_not_write_is_a_clear_error(tmp_path):
    with pytest.raises(pickle.PicklingError, match="state_dict"):
        flow.save(fnn.Linear(2, 2), tmp_path / "m.pth")
    with pytest.raises(pickle.PicklingError, match="numpy.float64"):
        flow.save({"acc": np.float64(0.5)}, tmp_path / "n.pth")
    with pytest.raises(TypeError, match="pickle_protocol"):
        flow.save({}, tmp_path / "p.pth", pickle_protocol=4)
    with pytest.raises(TypeError, match="target="):
        flow.load(_torch_file({}, tmp_path), target="cpu")
