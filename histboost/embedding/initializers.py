"""Initial embedding vectors as a pure function of ``(seed, key)``.

A key's first vector must not depend on which rank owns it, on when it was first seen or on
the order of insertion, otherwise re-sharding or changing the world size changes the model.
So there is no stateful random generator here: element ``j`` of key ``k``'s vector is
computed from a counter-based hash, ``mix64(mix64(k ^ s) + (j + 1) * G)`` with ``s`` derived
from the seed and ``G`` the 64-bit golden-ratio constant, and then mapped to the wanted
distribution. The arithmetic is integer (exact and identical on CPU and CUDA); the final
floating-point transform runs in float64 and is rounded once to the output dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ._hashing import INIT_SALT_SIGNED, _to_signed, mix64_torch

_GOLDEN = _to_signed(0x9E3779B97F4A7C15)
_CHUNK_ROWS = 1 << 16  # bounds the [rows, dim] int64 temporaries on big first batches


def seed_word(seed: int) -> int:
    s = torch.tensor([_to_signed(int(seed)) ^ INIT_SALT_SIGNED], dtype=torch.int64)
    return int(mix64_torch(s)[0])


def hash_bits(keys: torch.Tensor, dim: int, seed: int, stream: int = 0) -> torch.Tensor:
    """Uniform random 64-bit words per (key, column): int64 ``[n, dim]``.

    ``stream`` selects an independent sequence (the normal initialiser uses two).
    """
    base = mix64_torch(keys.to(torch.int64) ^ seed_word(seed)).unsqueeze(1)
    cols = torch.arange(dim, device=keys.device, dtype=torch.int64) * 2 + (stream + 1)
    return mix64_torch(base + cols.unsqueeze(0) * _GOLDEN)


def hash_uniform(keys: torch.Tensor, dim: int, seed: int, stream: int = 0) -> torch.Tensor:
    """Uniform numbers in ``(0, 1)`` per (key, column): float64 ``[n, dim]``.

    24 random bits (the top ones of the word) plus a half step, so both ends are excluded.
    """
    bits = (hash_bits(keys, dim, seed, stream) >> 40) & ((1 << 24) - 1)
    return (bits.to(torch.float64) + 0.5) * (1.0 / (1 << 24))


@dataclass(frozen=True)
class UniformInitializer:
    """``U(low, high)`` per element."""

    low: float = -0.05
    high: float = 0.05
    name: str = "uniform"

    def __call__(self, keys: torch.Tensor, dim: int, seed: int) -> torch.Tensor:
        u = hash_uniform(keys, dim, seed)
        return self.low + (self.high - self.low) * u

    def kernel_params(self) -> tuple[int, float, float]:
        """(kind, a, b) of the fused CUDA initialiser: ``a + b * u``."""
        return 0, float(self.low), float(self.high - self.low)


@dataclass(frozen=True)
class NormalInitializer:
    """``N(mean, std**2)`` per element (Box-Muller on two hash streams)."""

    mean: float = 0.0
    std: float = 0.01
    name: str = "normal"

    def __call__(self, keys: torch.Tensor, dim: int, seed: int) -> torch.Tensor:
        u1 = hash_uniform(keys, dim, seed, stream=0)
        u2 = hash_uniform(keys, dim, seed, stream=1)
        z = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos((2.0 * math.pi) * u2)
        return self.mean + self.std * z

    def kernel_params(self) -> tuple[int, float, float]:
        """(kind, a, b) of the fused CUDA initialiser: ``a + b * z``."""
        return 1, float(self.mean), float(self.std)


@dataclass(frozen=True)
class ConstantInitializer:
    """Every element equal to ``value`` (e.g. 0 for a linear/"wide" term)."""

    value: float = 0.0
    name: str = "constant"

    def __call__(self, keys: torch.Tensor, dim: int, seed: int) -> torch.Tensor:
        return torch.full((keys.numel(), dim), self.value, dtype=torch.float64, device=keys.device)


InitializerLike = str | UniformInitializer | NormalInitializer | ConstantInitializer | Callable
_REGISTRY: dict[str, type] = {
    "uniform": UniformInitializer,
    "normal": NormalInitializer,
    "constant": ConstantInitializer,
}


def get_initializer(spec: InitializerLike | dict | None) -> Callable:
    """Resolve an initialiser: ``None`` (default uniform +-0.05), a name ("uniform",
    "normal", "zeros"/"constant"), a config dict from :func:`initializer_config`, an
    instance, or any callable ``f(keys int64 [n], dim, seed) -> float tensor [n, dim]``.

    A custom callable must itself depend only on ``(keys, dim, seed)`` to keep the
    sharding-invariance guarantee.
    """
    if spec is None:
        return UniformInitializer()
    if isinstance(spec, str):
        if spec == "zeros":
            return ConstantInitializer(0.0)
        if spec not in _REGISTRY:
            raise ValueError(f"unknown initializer {spec!r}; use one of {sorted(_REGISTRY)}")
        return _REGISTRY[spec]()
    if isinstance(spec, dict):
        cfg = dict(spec)
        name = cfg.pop("name")
        if name not in _REGISTRY:
            raise ValueError(f"cannot rebuild custom initializer {name!r} from a config")
        return _REGISTRY[name](**cfg)
    if callable(spec):
        return spec
    raise TypeError(f"initializer must be a name, dict or callable, got {type(spec)}")


def initializer_config(init: Callable) -> dict[str, Any]:
    """JSON-able description of an initialiser (``{"name": "custom"}`` for callables)."""
    if isinstance(init, UniformInitializer | NormalInitializer | ConstantInitializer):
        return asdict(init)
    return {"name": "custom", "repr": repr(init)}


def initial_vectors(
    init: Callable, keys: torch.Tensor, dim: int, seed: int, dtype: torch.dtype
) -> torch.Tensor:
    """Initial rows for ``keys`` (int64 ``[n]``): ``dtype`` ``[n, dim]``.

    On CUDA the built-in uniform and normal initialisers run as one fused kernel (the torch
    version materialises a dozen ``[n, dim]`` int64 temporaries, which dominated steps that
    insert many keys); it computes the same integer hashes and float64 transform, so results
    agree with the torch version to float64 rounding before the final cast. Elsewhere the
    torch version runs, chunked over rows.
    """
    n = keys.numel()
    if keys.is_cuda and hasattr(init, "kernel_params") and n:
        from . import _cuda_ops

        out = torch.empty((n, dim), dtype=torch.float32, device=keys.device)
        kind, a, b = init.kernel_params()
        _cuda_ops.init_vectors(keys.to(torch.int64).contiguous(), seed_word(seed), kind, a, b,
                               out)
        return out.to(dtype)
    out = torch.empty((n, dim), dtype=dtype, device=keys.device)
    for lo in range(0, n, _CHUNK_ROWS):
        hi = min(n, lo + _CHUNK_ROWS)
        out[lo:hi] = init(keys[lo:hi], dim, seed).to(dtype)
    return out
