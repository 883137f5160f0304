"""flow.cuda: the CUDA device, through the driver API loaded at run time (no GPU needed to import)."""
from typing import Dict, Union

from . import _C, _dtype


def is_available() -> bool:
    """True when a CUDA driver and at least one device are present."""
    return _C.cuda_is_available()


def device_count() -> int:
    return _C.cuda_device_count()


def get_device_name(device: int = 0) -> str:
    return _C.cuda_device_name(device)


def synchronize(device=None) -> None:
    """Waits for every kernel flow queued on the device (a no-op without a GPU)."""
    _C.cuda_synchronize()


def unavailable_reason() -> str:
    """Why is_available() is False ('' when it is True)."""
    return _C.cuda_unavailable_reason()


# Memory: the counters of flow's caching allocator (runtime/cuda_allocator.h), under torch.cuda's
# names. Before a device's first allocation, and without CUDA, they are all zero (torch reports the
# same for a device it has not initialized).

def _device_index(device: Union[int, str, "_dtype.device", None]) -> int:
    if device is None:
        return _C.cuda_current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise ValueError(f"Expected a non-negative cuda device index, but got: {device}")
        return device
    d = _dtype.device(device) if isinstance(device, str) else device
    if not isinstance(d, _dtype.device) or d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
    return _C.cuda_current_device() if d.index is None else d.index


def memory_stats(device: Union[int, str, "_dtype.device", None] = None) -> Dict[str, int]:
    """The allocator's counters for `device`, with torch.cuda.memory_stats' key names where torch
    has the same figure (bytes of live blocks, their peak, reserved and cached bytes) and flow's own
    for the rest (driver allocations, free-list hits, frees)."""
    s = _C.cuda_memory_stats(_device_index(device))
    return {
        "allocated_bytes.all.current": s["allocated"],
        "allocated_bytes.all.peak": s["peak"],
        "requested_bytes.all.current": s["requested"],
        "reserved_bytes.all.current": s["reserved"],
        "inactive_split_bytes.all.current": 0,  # blocks are never split
        "cached_bytes.all.current": s["cached"],
        "num_device_alloc": s["device_allocs"],
        "num_cache_hits": s["cache_hits"],
        "num_frees": s["frees"],
    }


def memory_allocated(device: Union[int, str, "_dtype.device", None] = None) -> int:
    """Bytes in live tensors on `device` (sizes rounded to the allocator's size classes)."""
    return _C.cuda_memory_stats(_device_index(device))["allocated"]


def max_memory_allocated(device: Union[int, str, "_dtype.device", None] = None) -> int:
    """The peak of memory_allocated() since the start or the last reset_peak_memory_stats()."""
    return _C.cuda_memory_stats(_device_index(device))["peak"]


def memory_reserved(device: Union[int, str, "_dtype.device", None] = None) -> int:
    """Bytes the allocator holds from the driver: live blocks plus its cache."""
    return _C.cuda_memory_stats(_device_index(device))["reserved"]


def reset_peak_memory_stats(device: Union[int, str, "_dtype.device", None] = None) -> None:
    _C.cuda_reset_peak_memory(_device_index(device))


def library_counters() -> Dict[str, object]:
    """flow's own diagnostics of its GPU library calls since the process started: convolutions run
    through cuDNN's fused convolution-bias-activation call ("cudnn_fused") or as the convolution
    followed by flow's epilogue kernel ("cudnn_unfused"), the problems whose fused call cuDNN refused
    and the latest refusal, and cuBLASLt products whose epilogue was split off because cuBLASLt had
    no algorithm for it ("cublaslt_split_epilogue")."""
    return dict(_C.cuda_library_counters())


def empty_cache() -> None:
    """Returns every cached (free) block to the driver, on every device; live tensors stay."""
    _C.cuda_empty_cache()
