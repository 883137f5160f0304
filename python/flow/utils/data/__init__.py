"""flow.utils.data: torch.utils.data's data loading (datasets, samplers, DataLoader, collation),
in pure Python over flow tensors and flow's generators.

Note: ``DataLoader(num_workers > 0)`` loads with worker *threads*, not processes: one thread per
worker, each with its own shallow copy of the dataset, ``worker_init_fn(worker_id)`` run first in
it and ``get_worker_info()`` answering inside it; batches are prefetched (``prefetch_factor`` per
worker) and yielded in exactly the order of ``num_workers=0``, and a worker's exception is raised
again in the main loop with its own type and message. Threads share the process's random
generators, which are therefore not reseeded per worker (``get_worker_info().rng`` holds
per-worker ones). See dataloader.py for the details, and what differs from torch.
"""
from ._collate import collate, default_collate, default_convert  # noqa: F401
from .dataloader import DataLoader, WorkerInfo, get_worker_info  # noqa: F401
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,  # noqa: F401
                      TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset",
           "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler",
           "TensorDataset", "WeightedRandomSampler", "WorkerInfo", "default_collate", "default_convert",
           "get_worker_info", "random_split"]
