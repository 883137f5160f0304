"""torch.nn.utils.parametrize, for the parametrizations flow has (weight_norm)."""
from .weight_norm import is_parametrized, remove_parametrizations  # noqa: F401

__all__ = ["is_parametrized", "remove_parametrizations"]
