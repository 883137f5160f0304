"""flow.utils: torch.utils's data loading (flow.utils.data)."""
from . import data  # noqa: F401
