"""DataLoader: batches of a dataset's samples, loaded in the main thread or by worker threads.

Note: ``num_workers > 0`` starts worker *threads*, not processes (torch forks processes: flow's
runtime and CUDA state are not fork-safe, and threads need no pickling). Each worker is one
thread with its own shallow copy of the dataset (``get_worker_info().dataset``), on which
``worker_init_fn(worker_id)`` runs first: attributes a worker reassigns stay its own, while mutable
objects the dataset holds (lists, dicts, files) are shared by all workers. The main thread draws
the indices from the sampler and hands the batches round-robin to the workers, keeping up to
``prefetch_factor`` batches per worker in flight, and yields them in that order: the same batches,
in the same order, as ``num_workers=0`` (``in_order=False`` changes nothing). An IterableDataset
is iterated by every worker (each worker's copy, as in torch: shard with ``get_worker_info()``),
the batches interleaved round-robin, a worker dropping out when its iterator ends. An exception
raised in a worker is raised again in the main loop: the same exception object (its type,
message and traceback; a note names the worker), and iteration may go on after it, as in torch.
``timeout`` bounds the wait for each batch (RuntimeError "DataLoader timed out ..."). Threads
share the process's random generators, so flow, numpy and ``random`` are not reseeded per worker;
``get_worker_info().rng`` holds per-worker generators seeded with ``seed = base_seed + worker_id``
instead (torch's thread-worker field). Threads pay off where loading waits (files, decoding in C
code that releases the GIL; flow's kernels release it too), not for pure-Python transforms.
``multiprocessing_context`` is accepted and ignored; ``pin_memory`` is accepted and does nothing
(flow's host-to-device copies are synchronous).
"""
import collections
import copy
import functools
import itertools
import math
import random
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as _FutureTimeout
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Optional

import numpy as np

from ..._random import Generator
from ._collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, _random_seed

__all__ = ["DataLoader", "WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class _RNG:
    """A worker's own generators (threads share the process's global ones)."""
    random_generator: random.Random
    torch_generator: Generator
    numpy_generator: Optional[np.random.Generator] = None


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: its id, the number of workers, its seed
    (base seed + id), its copy of the dataset, and its own generators (``rng``)."""
    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Optional[_RNG] = None
    worker_method: Optional[str] = "thread"


_local = threading.local()


def get_worker_info() -> Optional[WorkerInfo]:
    """The calling worker's WorkerInfo; None in the main process."""
    return getattr(_local, "info", None)


def _enter_worker(info: WorkerInfo) -> None:
    _local.info = info


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None forever (the dataset decides where it ends)."""

    def __iter__(self):
        while True:
            yield None


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if getattr(self.dataset, "__getitems__", None):
            return self.collate_fn(self.dataset.__getitems__(index))
        return self.collate_fn([self.dataset[i] for i in index])


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = list(itertools.islice(self.dataset_iter, len(index)))
        self.ended = len(data) < len(index)
        if not data or (self.drop_last and self.ended):
            raise StopIteration
        return self.collate_fn(data)


class DataLoader:
    """Iterates over batches of ``dataset``: map-style datasets through ``sampler`` (sequential,
    or random with ``shuffle=True``) grouped by ``batch_size`` (or through ``batch_sampler``),
    iterable datasets in their own order; each batch is ``collate_fn(list of samples)``
    (default_collate), or ``default_convert(sample)`` per sample with ``batch_size=None``."""

    _initialized = False

    def __init__(self, dataset: Dataset, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Optional[Iterable] = None, batch_sampler: Optional[Iterable[List]] = None,
                 num_workers: int = 0, collate_fn: Optional[Callable[[List], Any]] = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Optional[Callable[[int], None]] = None, multiprocessing_context=None,
                 generator: Optional[Generator] = None, *, prefetch_factor: Optional[int] = None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor <= 0:  # torch: < 0 here, 0 fails at iter()
            raise ValueError("prefetch_factor option should be positive")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError("multiprocessing_context can only be used with multi-process loading (num_workers > 0), "
                             f"but got num_workers={num_workers}")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            else:
                sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._iterator = None
        self._initialized = True

    def __setattr__(self, attr, val) -> None:
        if self._initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                          "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _get_iterator(self):
        return _SingleProcessDataLoaderIter(self) if self.num_workers == 0 else _ThreadedDataLoaderIter(self)

    def __iter__(self):
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        if self._iterator is None:
            self._iterator = self._get_iterator()
        else:
            self._iterator._reset(self)
        return self._iterator

    def __len__(self) -> int:
        if not self._iterable:
            return len(self._index_sampler)
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is not None:
            length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
        return length


class _BaseDataLoaderIter:
    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = _random_seed(loader.generator)
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._num_yielded = 0

    def _fetcher_factory(self):
        """dataset -> a fetcher of its batches (a partial, so that workers hold no reference to self)."""
        return functools.partial(_IterableFetcher if self._iterable else _MapFetcher,
                                 auto_collation=self._auto_collation, collate_fn=self._collate_fn,
                                 drop_last=self._drop_last)

    def _reset(self, loader: DataLoader) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def __iter__(self):
        return self

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if self._iterable and self._IterableDataset_len_called is not None \
                and self._num_yielded > self._IterableDataset_len_called:
            warnings.warn(f"Length of IterableDataset {self._dataset} was reported to be "
                          f"{self._IterableDataset_len_called} (when accessing len(dataloader)), but "
                          f"{self._num_yielded} samples have been fetched.", stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        self._dataset_fetcher = self._fetcher_factory()(self._dataset)

    def _next_data(self):
        return self._dataset_fetcher.fetch(next(self._sampler_iter))


_ENDED = object()  # a worker's answer once its IterableDataset iterator is exhausted


class _Worker:
    """One worker: a single thread (so its tasks run in order) with its WorkerInfo and fetcher."""

    def __init__(self, info: WorkerInfo, make_fetcher, iterable: bool, init_fn) -> None:
        self.info, self._make_fetcher, self._iterable = info, make_fetcher, iterable
        self._error = None
        self._pool = ThreadPoolExecutor(1, f"flow_data_worker_{info.id}", _enter_worker, (info,))
        self._pool.submit(self._start, init_fn)

    def _start(self, init_fn=None) -> None:
        try:  # an error here is raised by this worker's first fetch, as in torch
            if init_fn is not None:
                init_fn(self.info.id)
            self._fetcher = self._make_fetcher(self.info.dataset)
        except Exception as e:  # noqa: BLE001
            self._error = e

    def resume(self) -> None:
        """A new epoch (persistent workers): a fresh fetcher, after any tasks still queued."""
        self._pool.submit(self._start)

    def submit(self, index):
        return self._pool.submit(self._fetch, index)

    def _fetch(self, index):
        try:
            if self._error is not None:
                raise self._error
            return self._fetcher.fetch(index)
        except StopIteration:
            if self._iterable:
                return _ENDED
            raise
        except Exception as e:
            note = f"(raised in DataLoader worker thread {self.info.id})"
            if hasattr(e, "add_note") and note not in getattr(e, "__notes__", ()):
                e.add_note(note)
            raise

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _replica(dataset):
    """A worker's copy of the dataset (shallow: attributes reassigned in a worker stay its own)."""
    try:
        return copy.copy(dataset)
    except Exception:  # noqa: BLE001  (an uncopyable dataset is shared)
        return dataset


class _ThreadedDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        n = self._num_workers
        self._max_tasks = loader.prefetch_factor * n
        self._workers = []
        make_fetcher = self._fetcher_factory()
        for i in range(n):
            seed = self._base_seed + i
            rng = _RNG(random.Random(seed), Generator().manual_seed(seed), np.random.default_rng(seed))
            info = WorkerInfo(id=i, num_workers=n, seed=seed, dataset=_replica(self._dataset), rng=rng)
            self._workers.append(_Worker(info, make_fetcher, self._iterable, loader.worker_init_fn))
        self._persistent = loader.persistent_workers
        self._shutdown = False
        self._tasks = collections.deque()
        self._start_epoch()

    def _start_epoch(self) -> None:
        self._active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._max_tasks):
            self._try_put_index()

    def _reset(self, loader: DataLoader) -> None:
        super()._reset(loader)
        while self._tasks:
            self._tasks.popleft()[1].cancel()
        for w in self._workers:
            w.resume()
        self._start_epoch()

    def _try_put_index(self) -> None:
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):  # the next worker whose iterator has not ended
            worker_id = next(self._worker_cycle)
            if self._active[worker_id]:
                self._tasks.append((worker_id, self._workers[worker_id].submit(index)))
                return

    def _next_data(self):
        while self._tasks:
            worker_id, future = self._tasks.popleft()
            try:
                data = future.result(timeout=self._timeout or None)
            except _FutureTimeout:
                self._tasks.appendleft((worker_id, future))
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
            except BaseException:
                self._try_put_index()
                raise
            self._try_put_index()
            if data is _ENDED:
                self._active[worker_id] = False
                continue
            return data
        if not self._persistent:
            self._shutdown_workers()
        raise StopIteration

    def _shutdown_workers(self) -> None:
        if not self._shutdown:
            self._shutdown = True
            for w in self._workers:
                w.shutdown()

    def __del__(self) -> None:
        if getattr(self, "_workers", None) is not None:
            self._shutdown_workers()
