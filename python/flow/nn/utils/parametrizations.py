"""torch.nn.utils.parametrizations: weight_norm (flow/nn/utils/weight_norm.py)."""
from .weight_norm import parametrized_weight_norm as weight_norm  # noqa: F401

__all__ = ["weight_norm"]
