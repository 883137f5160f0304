"""flow.utils.data (python/flow/utils/data/): datasets, samplers, collation and DataLoader against
torch.utils.data on the same fresh random data: the same batches (structure, dtypes, shapes,
values), the same lengths, the same errors. Random samplers are checked as distributions (flow's
streams are not torch's), within six standard errors. DataLoader's worker threads must give the
batches of num_workers=0, in the same order."""
import collections
import math
import threading
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import flow
import flow.utils.data as fdata
from conftest import assert_frequencies, assert_same, to_flow


# ---- helpers ----------------------------------------------------------------------------------------

def assert_batches(f, t, where="batch"):
    """flow output `f` has torch output `t`'s structure (container types, keys, lengths) and its
    tensors' dtypes, shapes and values."""
    if isinstance(t, torch.Tensor):
        assert isinstance(f, flow.Tensor), f"{where}: {type(f).__name__} where torch has a tensor"
        assert_same(f, t, rtol=0, atol=0, msg=where)
    elif isinstance(t, dict):
        assert type(f) is type(t) and list(f) == list(t), f"{where}: {f!r} vs {t!r}"
        for k in t:
            assert_batches(f[k], t[k], f"{where}[{k!r}]")
    elif isinstance(t, (list, tuple)):
        same_type = type(f).__name__ == type(t).__name__  # namedtuples: one class per framework's test
        assert same_type and len(f) == len(t), f"{where}: {type(f).__name__}/{len(f)} vs {type(t).__name__}/{len(t)}"
        for i, (a, b) in enumerate(zip(f, t)):
            assert_batches(a, b, f"{where}[{i}]")
    else:
        assert type(f) is type(t) and f == t, f"{where}: {f!r} vs {t!r}"


def raises_same(torch_fn, flow_fn):
    """torch raises, and flow raises the same exception type."""
    with pytest.raises(Exception) as t_err:  # noqa: B017
        torch_fn()
    with pytest.raises(t_err.type):
        flow_fn()


def _int(gen, lo, hi):
    return int(torch.randint(lo, hi, (), generator=gen))


def _to_flow_tree(x):
    if isinstance(x, torch.Tensor):
        return to_flow(x)
    if isinstance(x, dict):
        return {k: _to_flow_tree(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_to_flow_tree(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_to_flow_tree(v) for v in x)
    return x




class _Samples(tdata.Dataset):
    """A map-style dataset over a list (a torch Dataset; flow's DataLoader takes any indexable)."""

    def __init__(self, samples):
        self.samples = samples

    def __getitem__(self, i):
        return self.samples[i]

    def __len__(self):
        return len(self.samples)


def _iterable(base):
    """An IterableDataset class over `base` (torch's or flow's): range(start, stop) of floats, sharded
    by worker when shard=True."""

    class Range(base):
        def __init__(self, start, stop, shard=False, length=None):
            self.start, self.stop, self.shard, self.length = start, stop, shard, length

        def __iter__(self):
            info = (tdata if base is tdata.IterableDataset else fdata).get_worker_info()
            lo, hi = self.start, self.stop
            if self.shard and info is not None:
                per = math.ceil((hi - lo) / info.num_workers)
                lo, hi = lo + info.id * per, min(hi, lo + (info.id + 1) * per)
            return iter(float(i) for i in range(lo, hi))

        def __len__(self):
            return self.stop - self.start if self.length is None else self.length

    return Range


TRange, FRange = _iterable(tdata.IterableDataset), _iterable(fdata.IterableDataset)


# ---- datasets ---------------------------------------------------------------------------------------

def test_tensor_concat_subset_and_stack_datasets(gen):
    n, m = _int(gen, 1, 20), _int(gen, 1, 20)
    x, y = torch.randn(n, 3, generator=gen), torch.randint(0, 9, (n,), generator=gen)
    z = torch.randn(m, 3, generator=gen)
    tds, fds = tdata.TensorDataset(x, y), fdata.TensorDataset(to_flow(x), to_flow(y))
    assert len(fds) == len(tds) == n
    for i in range(n):
        assert_batches(fds[i], tds[i], f"TensorDataset[{i}]")
    longer = torch.randn(n + 1, generator=gen)
    raises_same(lambda: tdata.TensorDataset(x, longer), lambda: fdata.TensorDataset(to_flow(x), to_flow(longer)))

    tcat = tdata.TensorDataset(x) + tdata.TensorDataset(z)
    fcat = fdata.TensorDataset(to_flow(x)) + fdata.TensorDataset(to_flow(z))
    assert isinstance(fcat, fdata.ConcatDataset) and len(fcat) == len(tcat) == n + m
    assert fcat.cumulative_sizes == tcat.cumulative_sizes
    for i in list(range(-(n + m), n + m)):
        assert_batches(fcat[i], tcat[i], f"ConcatDataset[{i}]")
    raises_same(lambda: tcat[-(n + m) - 1], lambda: fcat[-(n + m) - 1])
    raises_same(lambda: tdata.ConcatDataset([]), lambda: fdata.ConcatDataset([]))
    raises_same(lambda: tdata.ConcatDataset([TRange(0, 3)]), lambda: fdata.ConcatDataset([FRange(0, 3)]))

    idx = torch.randint(0, n, (_int(gen, 0, 2 * n),), generator=gen).tolist()
    tsub, fsub = tdata.Subset(tds, idx), fdata.Subset(fds, idx)
    assert len(fsub) == len(tsub)
    for i in range(len(idx)):
        assert_batches(fsub[i], tsub[i], f"Subset[{i}]")
    inner = list(range(len(idx)))[::-1]
    assert_batches(fdata.Subset(fsub, inner).__getitems__(inner[:3]), tdata.Subset(tsub, inner).__getitems__(inner[:3]))

    samples = [float(v) for v in torch.randn(n, generator=gen)]
    tst, fst = tdata.StackDataset(tds, _Samples(samples)), fdata.StackDataset(fds, samples)
    tkw, fkw = tdata.StackDataset(a=tds, b=_Samples(samples)), fdata.StackDataset(a=fds, b=samples)
    assert len(fst) == len(fkw) == n
    for i in range(n):
        assert_batches(fst[i], tst[i])
        assert_batches(fkw[i], tkw[i])
    raises_same(lambda: tdata.StackDataset(tds, _Samples(samples[1:])), lambda: fdata.StackDataset(fds, samples[1:]))
    raises_same(lambda: tdata.StackDataset(tds, b=tds), lambda: fdata.StackDataset(fds, b=fds))
    raises_same(lambda: tdata.StackDataset(), lambda: fdata.StackDataset())
    with pytest.raises(NotImplementedError):
        fdata.Dataset()[0]


def test_chain_dataset_and_iterable_add(gen):
    a, b = _int(gen, 0, 10), _int(gen, 0, 10)
    tchain, fchain = TRange(0, a) + TRange(100, 100 + b), FRange(0, a) + FRange(100, 100 + b)
    assert isinstance(fchain, fdata.ChainDataset)
    assert list(fchain) == list(tchain) and len(fchain) == len(tchain) == a + b
    raises_same(lambda: list(tdata.ChainDataset([_Samples([1.0])])), lambda: list(fdata.ChainDataset([[1.0]])))


def test_random_split(gen):
    n = _int(gen, 10, 60)
    data = list(range(n))
    k = _int(gen, 1, 5)
    cuts = sorted(torch.randint(0, n + 1, (k - 1,), generator=gen).tolist())
    lengths = [hi - lo for lo, hi in zip([0] + cuts, cuts + [n])]
    g = flow.Generator().manual_seed(_int(gen, 0, 2**31))
    parts = fdata.random_split(data, lengths, generator=g)
    assert [len(p) for p in parts] == lengths and all(isinstance(p, fdata.Subset) for p in parts)
    assert sorted(v for p in parts for v in p) == data
    g.manual_seed(g.initial_seed())
    assert [list(p) for p in fdata.random_split(data, lengths, generator=g)] == [list(p) for p in parts]
    seed = _int(gen, 0, 2**31)
    flow.manual_seed(seed)
    first = [list(p) for p in fdata.random_split(data, lengths)]
    flow.manual_seed(seed)
    assert [list(p) for p in fdata.random_split(data, lengths)] == first  # the default generator

    w = torch.rand(k, generator=gen, dtype=torch.float64) + 0.01
    fractions = (w / w.sum()).tolist()
    fractions[-1] = 1.0 - sum(fractions[:-1])
    while sum(fractions) > 1:  # torch takes fractions summing to at most 1 (within rounding)
        fractions[-1] = float(np.nextafter(fractions[-1], 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty splits warn (in both)
        tparts = tdata.random_split(data, fractions)
        fparts = fdata.random_split(data, fractions)
    assert [len(p) for p in fparts] == [len(p) for p in tparts]
    assert sorted(v for p in fparts for v in p) == data
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        fdata.random_split(list(range(3)), [0.9, 0.1])
    for bad in ([n - 1], [n, 1], [0.5, 0.3], [1.5, -0.5]):
        raises_same(lambda: tdata.random_split(data, bad), lambda: fdata.random_split(data, bad))


# ---- samplers ---------------------------------------------------------------------------------------

def test_sequential_and_batch_samplers_match_torch(gen):
    for _ in range(5):
        n, bs, drop = _int(gen, 0, 40), _int(gen, 1, 9), bool(_int(gen, 0, 2))
        data = list(range(n))
        assert list(fdata.SequentialSampler(data)) == list(tdata.SequentialSampler(data))
        assert len(fdata.SequentialSampler(data)) == n
        tb, fb = tdata.BatchSampler(tdata.SequentialSampler(data), bs, drop), fdata.BatchSampler(range(n), bs, drop)
        assert list(fb) == list(tb) and len(fb) == len(tb), (n, bs, drop)
    for bad in [(0, False), (-2, False), (2.0, False), (True, False), (2, 1), (2, None)]:
        raises_same(lambda: tdata.BatchSampler(range(5), *bad), lambda: fdata.BatchSampler(range(5), *bad))


def test_random_sampler(gen):
    n = _int(gen, 2, 30)
    data = list(range(n))
    g = flow.Generator().manual_seed(_int(gen, 0, 2**31))
    s = fdata.RandomSampler(data, generator=g)
    epochs = [list(s) for _ in range(3)]
    assert len(s) == n and all(sorted(e) == data for e in epochs)
    g.manual_seed(g.initial_seed())
    assert [list(s) for _ in range(3)] == epochs
    k = _int(gen, 1, 4 * n)
    many = list(fdata.RandomSampler(data, num_samples=k, generator=g))
    assert len(many) == k == len(fdata.RandomSampler(data, num_samples=k))
    for start in range(0, k, n):  # successive permutations
        chunk = many[start:start + n]
        assert len(set(chunk)) == len(chunk)
    rep = list(fdata.RandomSampler(data, replacement=True, num_samples=k, generator=g))
    assert len(rep) == k and all(0 <= i < n for i in rep)
    seed = _int(gen, 0, 2**31)
    flow.manual_seed(seed)
    a = list(fdata.RandomSampler(data))
    flow.manual_seed(seed)
    assert list(fdata.RandomSampler(data)) == a  # no generator: a seed from the default generator

    # uniformity: where element 0 lands in 3000 permutations; the values of 20000 draws with replacement
    pos = collections.Counter(list(fdata.RandomSampler(range(6))).index(0) for _ in range(3000))
    assert_frequencies([pos[i] for i in range(6)], [1 / 6] * 6, "RandomSampler position of 0")
    draws = np.bincount(list(fdata.RandomSampler(range(7), replacement=True, num_samples=20000)), minlength=7)
    assert_frequencies(draws, [1 / 7] * 7, "RandomSampler with replacement")

    for args, kw in [((), {"replacement": 1}), ((), {"num_samples": 0}), ((), {"num_samples": -3}),
                     ((), {"num_samples": 2.5})]:
        raises_same(lambda: tdata.RandomSampler(data, *args, **kw), lambda: fdata.RandomSampler(data, *args, **kw))
    raises_same(lambda: tdata.RandomSampler([]), lambda: fdata.RandomSampler([]))


def test_subset_random_sampler(gen):
    idx = torch.randint(-50, 50, (_int(gen, 1, 30),), generator=gen).tolist()
    g = flow.Generator().manual_seed(_int(gen, 0, 2**31))
    s = fdata.SubsetRandomSampler(idx, generator=g)
    first = list(s)
    assert sorted(first) == sorted(idx) and len(s) == len(idx)
    g.manual_seed(g.initial_seed())
    assert list(s) == first
    firsts = collections.Counter(next(iter(fdata.SubsetRandomSampler([10, 20, 30, 40]))) for _ in range(2000))
    assert_frequencies([firsts[v] for v in (10, 20, 30, 40)], [0.25] * 4, "SubsetRandomSampler first index")


def test_weighted_random_sampler(gen):
    k = _int(gen, 2, 8)
    w = (torch.rand(k, generator=gen, dtype=torch.float64) * 3).tolist()
    w[_int(gen, 0, k)] = 0.0
    p = np.array(w) / sum(w)
    s = fdata.WeightedRandomSampler(w, 20000)
    draws = list(s)
    assert len(s) == 20000 and len(draws) == 20000
    assert_frequencies(np.bincount(draws, minlength=k), p, "WeightedRandomSampler")
    assert fdata.WeightedRandomSampler(to_flow(torch.tensor(w)), 5).weights.dtype is flow.float64

    g = flow.Generator().manual_seed(_int(gen, 0, 2**31))
    s = fdata.WeightedRandomSampler(w, k - 1, replacement=False, generator=g)
    first = list(s)
    assert len(set(first)) == k - 1 and w.index(0.0) not in first
    g.manual_seed(g.initial_seed())
    assert list(s) == first
    firsts = [next(iter(fdata.WeightedRandomSampler(w, 1, replacement=False))) for _ in range(3000)]
    assert_frequencies(np.bincount(firsts, minlength=k), p, "WeightedRandomSampler first draw without replacement")

    for args in [(w, 0), (w, -1), (w, 2.0), (w, True), (w, 3, 1), ([[1.0, 2.0]], 3)]:
        raises_same(lambda: tdata.WeightedRandomSampler(*args), lambda: fdata.WeightedRandomSampler(*args))


# ---- collation --------------------------------------------------------------------------------------

TPoint = collections.namedtuple("Point", ["x", "label"])
FPoint = collections.namedtuple("Point", ["x", "label"])


def _random_sample(gen, shape, dtypes):
    """One sample (torch version) mixing every type default_collate handles."""
    x = torch.randn(shape, generator=gen).to(dtypes[0])
    label = int(torch.randint(-5, 5, (), generator=gen))
    a = np.asarray(torch.randn(2, generator=gen).numpy(), dtype=np.float64)
    return {"x": x, "label": label, "w": float(torch.rand((), generator=gen)), "flag": bool(label > 0),
            "name": f"s{label}", "raw": b"b", "arr": a, "np_i": np.int32(label), "np_f": np.float32(label / 2),
            "pair": (x.to(dtypes[1]), [label, float(label)]), "pt": TPoint(x, label),
            "nested": {"list": [x.sum(), label]}}


def _flow_sample(s):
    f = _to_flow_tree(s)
    f["pt"] = FPoint(*_to_flow_tree(tuple(s["pt"])))
    return f


@pytest.mark.parametrize("dtypes", [(torch.float32, torch.int64), (torch.float64, torch.int32),
                                    (torch.float16, torch.bool), (torch.bfloat16, torch.float32)])
def test_default_collate_matches_torch(gen, dtypes):
    shape = tuple(torch.randint(1, 4, (_int(gen, 0, 3),), generator=gen).tolist())
    batch = [_random_sample(gen, shape, dtypes) for _ in range(_int(gen, 1, 6))]
    tout, fout = tdata.default_collate(batch), fdata.default_collate([_flow_sample(s) for s in batch])
    assert_batches(fout, tout)
    assert fout["w"].dtype is flow.float64 and fout["label"].dtype is flow.int64 and fout["flag"].dtype is flow.bool
    assert isinstance(fout["pair"], list) and type(fout["pt"]) is FPoint  # tuples become lists, namedtuples stay
    assert_batches(fdata.default_convert(_flow_sample(batch[0])), tdata.default_convert(batch[0]))


def test_default_collate_errors_like_torch(gen):
    x, y = torch.randn(3, generator=gen), torch.randn(4, generator=gen)
    cases = [
        ([x, y], "tensors of different sizes"),
        ([[1, 2], [1, 2, 3]], "lists of different lengths"),
        ([object(), object()], "an unsupported type"),
        ([np.array(["a"]), np.array(["b"])], "numpy string arrays"),
        ([{"a": x}, {"b": x}], "dicts with different keys"),
    ]
    for batch, what in cases:
        fbatch = [_to_flow_tree(b) for b in batch]
        raises_same(lambda: tdata.default_collate(batch), lambda: fdata.default_collate(fbatch))
    strs = np.array(["a", "bc"])
    assert fdata.default_convert(strs) is strs  # numpy string arrays stay


# ---- DataLoader -------------------------------------------------------------------------------------

def _pairs(gen, n):
    """n samples (torch, flow) of (tensor, int) with a random feature shape."""
    d = _int(gen, 1, 5)
    xs, ys = torch.randn(n, d, generator=gen), torch.randint(0, 10, (n,), generator=gen).tolist()
    return [(x, y) for x, y in zip(xs, ys)], [(to_flow(x), y) for x, y in zip(xs, ys)]


def test_dataloader_sequential_matches_torch(gen):
    for _ in range(4):
        n, bs, drop = _int(gen, 0, 30), _int(gen, 1, 8), bool(_int(gen, 0, 2))
        tsamples, fsamples = _pairs(gen, n)
        tl = tdata.DataLoader(_Samples(tsamples), bs, drop_last=drop)
        fl = fdata.DataLoader(fsamples, bs, drop_last=drop)
        assert len(fl) == len(tl)
        tb, fb = list(tl), list(fl)
        assert len(fb) == len(tb)
        for i, (a, b) in enumerate(zip(fb, tb)):
            assert_batches(a, b, f"batch {i} (n={n}, bs={bs}, drop_last={drop})")
    tsamples, fsamples = _pairs(gen, 7)
    tl, fl = tdata.DataLoader(_Samples(tsamples), batch_size=None), fdata.DataLoader(fsamples, batch_size=None)
    assert_batches(list(fl), list(tl), "batch_size=None")
    floats = torch.randn(9, generator=gen).tolist()
    tl = tdata.DataLoader(_Samples(floats), batch_size=None)
    assert_batches(list(fdata.DataLoader(floats, batch_size=None)), list(tl), "batch_size=None over floats")

    bsampler = [[2, 0], [5], [1, 3, 4]]
    tl = tdata.DataLoader(_Samples(tsamples), batch_sampler=bsampler)
    fl = fdata.DataLoader(fsamples, batch_sampler=bsampler)
    assert len(fl) == len(tl) == 3
    assert_batches(list(fl), list(tl), "batch_sampler")
    order = [6, 1, 1, 0]
    tl = tdata.DataLoader(_Samples(tsamples), batch_size=3, sampler=order, collate_fn=lambda b: [y for _, y in b])
    fl = fdata.DataLoader(fsamples, batch_size=3, sampler=order, collate_fn=lambda b: [y for _, y in b])
    assert list(fl) == list(tl) and len(fl) == len(tl)


def test_dataloader_shuffle(gen):
    n, bs = _int(gen, 20, 40), _int(gen, 1, 6)
    data = list(range(n))
    loader = fdata.DataLoader(data, batch_size=bs, shuffle=True)
    epochs = [flow.cat(list(loader)).tolist() for _ in range(2)]
    assert all(sorted(e) == data for e in epochs) and epochs[0] != epochs[1]
    assert isinstance(loader.sampler, fdata.RandomSampler) and len(loader) == math.ceil(n / bs)
    seed = _int(gen, 0, 2**31)
    flow.manual_seed(seed)
    first = flow.cat(list(loader)).tolist()
    flow.manual_seed(seed)
    assert flow.cat(list(loader)).tolist() == first
    g = flow.Generator().manual_seed(seed)
    loader = fdata.DataLoader(data, batch_size=bs, shuffle=True, generator=g)
    first = flow.cat(list(loader)).tolist()
    g.manual_seed(seed)
    flow.rand(5)  # the default generator is not the loader's
    assert flow.cat(list(loader)).tolist() == first


def test_dataloader_iterable_dataset_matches_torch(gen):
    n, bs, drop = _int(gen, 0, 25), _int(gen, 1, 6), bool(_int(gen, 0, 2))
    tl, fl = tdata.DataLoader(TRange(0, n), bs, drop_last=drop), fdata.DataLoader(FRange(0, n), bs, drop_last=drop)
    assert len(fl) == len(tl)
    assert_batches(list(fl), list(tl), "IterableDataset")
    assert_batches(list(fdata.DataLoader(FRange(0, n), batch_size=None)),
                   list(tdata.DataLoader(TRange(0, n), batch_size=None)), "IterableDataset, batch_size=None")
    fl = fdata.DataLoader(FRange(0, 5, length=2), batch_size=None)
    assert len(fl) == 2
    with pytest.warns(UserWarning, match="Length of IterableDataset"):
        list(fl)


def test_dataloader_bad_arguments_raise_like_torch(gen):
    data, tds = list(range(6)), _Samples(list(range(6)))
    it_t, it_f = TRange(0, 4), FRange(0, 4)
    cases = [
        ({"num_workers": -1}, False), ({"timeout": -1.0}, False), ({"prefetch_factor": 2}, False),
        ({"num_workers": 1, "prefetch_factor": -1}, False), ({"persistent_workers": True}, False),
        ({"shuffle": True, "sampler": [0, 1]}, False), ({"batch_sampler": [[0]], "batch_size": 2}, False),
        ({"batch_sampler": [[0]], "shuffle": True}, False), ({"batch_sampler": [[0]], "sampler": [0]}, False),
        ({"batch_sampler": [[0]], "drop_last": True}, False), ({"batch_size": None, "drop_last": True}, False),
        ({"batch_size": 0}, False), ({"batch_size": -2}, False), ({"multiprocessing_context": "fork"}, False),
        ({"shuffle": True}, True), ({"sampler": [0, 1]}, True), ({"batch_sampler": [[0]]}, True),
    ]
    for kw, iterable in cases:
        raises_same(lambda: tdata.DataLoader(it_t if iterable else tds, **kw),
                    lambda: fdata.DataLoader(it_f if iterable else data, **kw))
    fl, tl = fdata.DataLoader(data), tdata.DataLoader(tds)
    for attr in ("batch_size", "sampler", "dataset", "drop_last"):
        raises_same(lambda: setattr(tl, attr, None), lambda: setattr(fl, attr, None))
    fl.num_workers = 0  # other attributes may change
    raises_same(lambda: next(iter(tdata.DataLoader(tds, timeout=1.0))),
                lambda: next(iter(fdata.DataLoader(data, timeout=1.0))))
    assert fdata.DataLoader(data, pin_memory=True).pin_memory  # accepted; copies are synchronous


# ---- worker threads ---------------------------------------------------------------------------------

class _Recording:
    """A map-style dataset that logs (index, get_worker_info()) per fetch. Worker copies are shallow,
    so they share the log."""

    def __init__(self, samples):
        self.samples, self.log = samples, []

    def __getitem__(self, i):
        self.log.append((i, fdata.get_worker_info()))
        return self.samples[i]

    def __len__(self):
        return len(self.samples)


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_workers_give_the_single_process_batches(gen, num_workers):
    n, bs, prefetch = _int(gen, 0, 40), _int(gen, 1, 5), _int(gen, 1, 4)
    _, fsamples = _pairs(gen, n)
    ds = _Recording(fsamples)
    seed = _int(gen, 0, 2**31)
    for shuffle in (False, True) if n else (False,):  # (shuffling an empty dataset raises, as in torch)
        flow.manual_seed(seed)
        expected = list(fdata.DataLoader(ds, bs, shuffle=shuffle))
        assert all(info is None for _, info in ds.log) and len(ds.log) == n
        ds.log.clear()
        flow.manual_seed(seed)
        loader = fdata.DataLoader(ds, bs, shuffle=shuffle, num_workers=num_workers, prefetch_factor=prefetch)
        got = list(loader)
        assert len(got) == len(expected) == len(loader)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert flow.equal(a[0], b[0]) and flow.equal(a[1], b[1]), f"batch {i}"
        if not shuffle:  # batches go round-robin to the workers
            assert sorted((i, info.id) for i, info in ds.log) == [(i, i // bs % num_workers) for i in range(n)]
        infos = {info.id: info for _, info in ds.log}
        for w, info in infos.items():
            assert info.num_workers == num_workers and info.dataset is not ds and info.worker_method == "thread"
            assert info.seed - w == next(iter(infos.values())).seed - next(iter(infos)), "seed = base_seed + id"
            assert info.rng.torch_generator.initial_seed() == info.seed
        ds.log.clear()
    assert fdata.get_worker_info() is None


def test_worker_init_fn_and_persistent_workers(gen):
    n, nw = _int(gen, 5, 30), 2
    calls = []
    lock = threading.Lock()

    def init(worker_id):
        info = fdata.get_worker_info()
        with lock:
            calls.append((worker_id, info.id, threading.get_ident()))

    data = list(range(n))
    loader = fdata.DataLoader(data, batch_size=3, num_workers=nw, worker_init_fn=init)
    for _ in range(2):
        assert flow.cat(list(loader)).tolist() == data
    assert sorted(c[0] for c in calls) == [0, 0, 1, 1] and all(a == b for a, b, _ in calls)
    assert threading.get_ident() not in {c[2] for c in calls}
    calls.clear()
    loader = fdata.DataLoader(data, batch_size=3, shuffle=True, num_workers=nw, worker_init_fn=init,
                              persistent_workers=True)
    epochs = [flow.cat(list(loader)).tolist() for _ in range(3)]
    assert all(sorted(e) == data for e in epochs)
    assert sorted(c[0] for c in calls) == [0, 1]  # once per worker, not per epoch
    it = iter(loader)
    next(it)  # an epoch abandoned midway: the next one starts afresh
    assert sorted(flow.cat(list(loader)).tolist()) == data
    loader = fdata.DataLoader(FRange(0, n, shard=True), batch_size=3, num_workers=nw, persistent_workers=True)
    for _ in range(2):  # each epoch iterates the workers' replicas anew
        assert sorted(flow.cat(list(loader)).tolist()) == [float(i) for i in data]


def test_iterable_dataset_with_workers_matches_torch(gen):
    """Each worker iterates its own replica: unsharded, every sample comes once per worker; sharded
    with get_worker_info, once. Batches interleave round-robin over the workers, as torch's."""
    n, bs = _int(gen, 0, 20), _int(gen, 1, 5)
    for shard in (False, True):
        for batch_size in (bs, None):
            tl = tdata.DataLoader(TRange(0, n, shard), batch_size=batch_size, num_workers=2)
            fl = fdata.DataLoader(FRange(0, n, shard), batch_size=batch_size, num_workers=2)
            assert_batches(list(fl), list(tl), f"shard={shard}, batch_size={batch_size}")


def test_worker_init_fn_can_configure_the_worker_copy(gen):
    n = _int(gen, 4, 30)

    def init(worker_id):  # torch's documented pattern: each worker narrows its copy of the dataset
        info = fdata.get_worker_info()
        ds = info.dataset
        per = math.ceil((ds.stop - ds.start) / info.num_workers)
        ds.start, ds.stop = ds.start + worker_id * per, min(ds.stop, ds.start + (worker_id + 1) * per)

    ds = FRange(0, n)
    got = flow.cat(list(fdata.DataLoader(ds, batch_size=2, num_workers=3, worker_init_fn=init))).tolist()
    assert sorted(got) == [float(i) for i in range(n)] and (ds.start, ds.stop) == (0, n)


class _Failing:
    def __init__(self, n, bad):
        self.n, self.bad = n, bad

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"no sample {i}")
        return float(i)

    def __len__(self):
        return self.n


@pytest.mark.parametrize("num_workers", [0, 2])
def test_worker_exceptions_surface_in_the_main_loop(gen, num_workers):
    n = _int(gen, 6, 20)
    bad = _int(gen, 0, n)
    loader = fdata.DataLoader(_Failing(n, bad), batch_size=2, num_workers=num_workers)
    it, got = iter(loader), []
    with pytest.raises(KeyError, match=f"no sample {bad}"):
        for b in it:
            got.append(b)
    assert [v for b in got for v in b.tolist()] == [float(i) for i in range(bad - bad % 2)]
    rest = [b.tolist() for b in it]  # iteration goes on after the failed batch, as torch's
    assert rest == [[float(i), float(i + 1)][:n - i] for i in range(bad - bad % 2 + 2, n, 2)]

    def init(worker_id):
        raise ValueError(f"init failed in {worker_id}")

    with pytest.raises(ValueError, match="init failed in 0"):
        list(fdata.DataLoader(list(range(4)), num_workers=2, worker_init_fn=init))


def test_prefetch_is_bounded_and_timeout_raises(gen):
    nw, prefetch = 2, _int(gen, 1, 4)
    started, entered, release = [], threading.Event(), threading.Event()

    class Blocking:
        def __getitem__(self, i):
            started.append(i)
            if i == 0:
                entered.set()
                release.wait(60)  # (bounded: a broken timeout fails instead of hanging)
            return i

        def __len__(self):
            return 50

    loader = fdata.DataLoader(Blocking(), batch_size=None, num_workers=nw, prefetch_factor=prefetch, timeout=0.05)
    it = iter(loader)
    with pytest.raises(RuntimeError, match="timed out"):
        next(it)
    assert entered.wait(60)
    assert max(started) < nw * prefetch  # never more than prefetch_factor batches per worker in flight
    release.set()
    assert list(it) == list(range(50))  # the late batch is still first
    assert max(started) == 49 and sorted(started) == list(range(50))
