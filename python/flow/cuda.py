"""flow.cuda: the CUDA device, through the driver API loaded at run time (no GPU needed to import)."""
from typing import Any, Dict, Optional, Tuple, Union

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


def current_device() -> int:
    return _C.cuda_current_device()


def set_device(device: Union[int, str, "_dtype.device"]) -> None:
    """flow runs on the current CUDA device; selecting another one is not supported."""
    if _device_index(device) != current_device():
        raise NotImplementedError(f"flow runs on the current CUDA device ({current_device()}); set_device({device!r}) "
                                  f"would select another")


def _require_current(device: Union[int, str, "_dtype.device", None]) -> None:
    """flow places CUDA tensors on the current device only: an explicit other index is refused
    (torch's "invalid device ordinal" where no such device exists), never silently redirected."""
    if device is None or isinstance(device, bool):
        return
    if not isinstance(device, int) and _dtype.device(device).index is None:
        return  # "cuda": the current device, whatever it is
    index = _device_index(device)
    if index == current_device():
        return
    if not 0 <= index < device_count():
        raise RuntimeError(f"CUDA error: invalid device ordinal (device {index}; {device_count()} device(s))")
    raise NotImplementedError(f"flow runs on the current CUDA device ({current_device()}); cuda:{index} is another "
                              f"device")


def get_device_capability(device: Union[int, str, "_dtype.device", None] = None) -> Tuple[int, int]:
    return tuple(_C.cuda_device_capability(_device_index(device)))


def is_bf16_supported() -> bool:
    """bfloat16 arithmetic on the device: compute capability 8.0 (Ampere) or newer."""
    return is_available() and get_device_capability()[0] >= 8


def manual_seed(seed: int) -> None:
    """flow has one random generator for every device (flow.manual_seed)."""
    from ._creation import manual_seed as _seed

    _seed(seed)


manual_seed_all = manual_seed


class Event:
    """torch.cuda.Event: a marker in flow's stream of GPU work, for timing it (``elapsed_time``) or
    waiting for it (``synchronize``). Events are recorded on flow's current stream, the one every
    kernel, copy and library call of the thread goes to (runtime/cuda_stream.h), so ``wait`` has
    nothing to order. Timing is always enabled; ``synchronize`` always waits (so ``blocking`` changes
    nothing); ``interprocess=True`` is refused."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        if interprocess:
            raise NotImplementedError("flow.cuda.Event(interprocess=True) is not supported")
        self._e = _C.CudaEvent()

    def record(self, stream: Optional["Stream"] = None) -> None:
        _check_flow_stream(stream, "Event.record")
        self._e.record()

    def wait(self, stream: Optional["Stream"] = None) -> None:
        _check_flow_stream(stream, "Event.wait")  # one stream: already ordered after the record

    def synchronize(self) -> None:
        self._e.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event and ``end_event`` (waits for ``end_event``)."""
        return self._e.elapsed_time(end_event._e)


class Stream:
    """flow's stream of GPU work on the current device (what ``current_stream()`` returns). Creating
    other streams is not supported: flow's caching allocator orders block reuse on one stream."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError("flow.cuda.Stream(): flow runs all GPU work on one stream per device; use "
                                  "flow.cuda.current_stream()")

    @classmethod
    def _flow(cls) -> "Stream":
        s = object.__new__(cls)
        return s

    def synchronize(self) -> None:
        synchronize()

    def wait_event(self, event: Event) -> None:
        pass  # the event was recorded on this very stream

    def wait_stream(self, stream: "Stream") -> None:
        _check_flow_stream(stream, "Stream.wait_stream")

    def record_event(self, event: Optional[Event] = None) -> Event:
        event = event or Event()
        event.record()
        return event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream)

    def __hash__(self) -> int:
        return 0


def _check_flow_stream(stream: Optional[Stream], what: str) -> None:
    if stream is not None and not isinstance(stream, Stream):
        raise TypeError(f"{what}: expected a flow.cuda.Stream, got {type(stream).__name__}")


def current_stream(device=None) -> Stream:
    return Stream._flow()


default_stream = current_stream


class stream:
    """``with flow.cuda.stream(s):`` for ``s`` flow's own stream (the only one there is)."""

    def __init__(self, s: Optional[Stream]) -> None:
        _check_flow_stream(s, "flow.cuda.stream")

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class amp:
    """torch.cuda.amp's (deprecated) spelling of ``flow.autocast("cuda", ...)``."""

    @staticmethod
    def autocast(enabled: bool = True, dtype: Any = None, cache_enabled: bool = True):
        from .amp import autocast as _autocast

        return _autocast("cuda", dtype=dtype if dtype is not None else _dtype.float16, enabled=enabled)


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
    and the latest refusal, the fused problems without a residual probed for whether cuDNN reads its
    z operand at alpha2 = 0 ("cudnn_z_probes") and those where it did ("cudnn_z_read": their output
    is zeroed before each call), and cuBLASLt products whose epilogue was split off because cuBLASLt had
    no algorithm for it ("cublaslt_split_epilogue"), and the cuBLASLt plans made (descriptors and
    algorithm, one per problem, operand alignments and device: "cublaslt_plans")."""
    return dict(_C.cuda_library_counters())


def empty_cache() -> None:
    """Returns every cached (free) block to the driver, on every device; live tensors stay."""
    _C.cuda_empty_cache()
