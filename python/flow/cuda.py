"""flow.cuda: the CUDA device, through the driver API loaded at run time (no GPU needed to import)."""
from . import _C


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
