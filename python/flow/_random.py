"""flow.Generator and the default generator: where flow's host-side random numbers come from.

Note: a Generator wraps a numpy ``Generator`` (PCG64) seeded like torch's: ``manual_seed(s)`` makes
its draws repeatable, ``seed()`` reseeds it from the OS and returns the seed. flow's numbers follow
torch's distributions, never torch's exact stream (torch's CPU stream is a Mersenne Twister with
its own transformations, its CUDA one Philox). ``get_state()`` returns the state as a uint8 tensor,
as torch's does (its bytes are flow's own encoding, the PCG64 state as JSON, so a torch state
cannot be loaded into flow or the reverse); ``set_state()`` restores it.

Inside ``@flow.jit`` draws come from the in-graph counter-based generator instead (see
``_creation.counter_rand``), so that a compiled function draws new numbers on every call; a
Generator cannot be used there (its draws happen on the host, at trace time only).
"""
import json
import secrets

import numpy as np

from . import _dtype as D

__all__ = ["Generator", "default_generator", "initial_seed", "seed", "get_rng_state", "set_rng_state"]


class Generator:
    """torch.Generator(device='cpu'): an independent random stream for ``generator=`` arguments."""

    def __init__(self, device="cpu"):
        self.device = D.device(device)
        self._initial_seed = 67280421310721  # torch's default seed of a new Generator
        self._np = np.random.default_rng(self._initial_seed)

    def manual_seed(self, seed):
        seed = int(seed)
        if not -0x8000_0000_0000_0000 <= seed <= 0xFFFF_FFFF_FFFF_FFFF:
            raise RuntimeError(f"Overflow when unpacking long: seed {seed} is out of the 64-bit range")
        self._initial_seed = seed & 0xFFFF_FFFF_FFFF_FFFF  # torch keeps a negative seed's two's complement
        self._np = np.random.default_rng(self._initial_seed)
        return self

    def seed(self):
        s = secrets.randbits(63)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._initial_seed

    def get_state(self):
        from ._creation import tensor

        raw = json.dumps(self._np.bit_generator.state).encode()
        return tensor(np.frombuffer(raw, dtype=np.uint8).copy())

    def set_state(self, new_state):
        from ._tensor import Tensor

        if not isinstance(new_state, Tensor) or new_state.dtype is not D.uint8 or new_state.ndim != 1:
            raise TypeError("Generator.set_state: expected the uint8 tensor returned by flow's Generator.get_state()")
        try:
            state = json.loads(new_state.cpu().numpy().tobytes().decode())
            assert isinstance(state, dict) and "bit_generator" in state
            bit_generator = np.random.PCG64()
            bit_generator.state = state
        except Exception:  # noqa: BLE001
            raise RuntimeError("Generator.set_state: the tensor is not a state written by flow's "
                               "Generator.get_state() (torch's RNG states do not load into flow)") from None
        self._np.bit_generator.state = state
        return self

    def __repr__(self):
        return f"<flow.Generator object, device={self.device}, initial_seed={self._initial_seed}>"


default_generator = Generator()
default_generator.manual_seed(secrets.randbits(63))  # like torch, a fresh process starts unseeded


def np_rng(generator=None):
    """The numpy generator behind ``generator`` (None: the default generator)."""
    if generator is None:
        return default_generator._np
    if not isinstance(generator, Generator):
        raise TypeError(f"expected a flow.Generator for 'generator', got {type(generator).__name__}")
    return generator._np


def initial_seed():
    return default_generator.initial_seed()


def seed():
    """Reseeds the default generator (and the in-graph one) from the OS; returns the seed."""
    from ._creation import manual_seed

    s = secrets.randbits(63)
    manual_seed(s)
    return s


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)
