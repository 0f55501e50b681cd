"""Gradient quantisation: the scales and the rounding key of one tree, decided on the host.

Every backend rounds a tree's float32 gradient pairs to integers the same way
(``floor(g * inv_scale + u)`` with u uniform in [0, 1) from a counter-based hash of
(key, 2 * row + channel), see `histboost.kernels.cpu.quantize`), so the integers, and every sum
of them, are identical on any thread count, backend or worker split. The scales follow from the
largest |g| and |h| of the tree's rows (reduced across workers): the largest value maps to at
most ``2**(bits-1) - 1``, so int64 histogram sums of up to 2**32 rows cannot overflow, and the
scales are powers of two, so scaling the integer sums back to float64 is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Quantisation:
    """How one tree's gradient pairs are rounded.

    g_inv_scale, h_inv_scale: multipliers applied before rounding (powers of two);
    g_scale, h_scale: their inverses, turning integer sums back into gradient units;
    key: uint64 seed of the counter-based rounding RNG (as a Python int);
    max_value: no rounded |value| exceeds it (2**(bits-1) - 1).
    """

    g_inv_scale: float
    h_inv_scale: float
    key: int
    max_value: float = float(2**31 - 1)

    @property
    def g_scale(self) -> float:
        return 1.0 / self.g_inv_scale

    @property
    def h_scale(self) -> float:
        return 1.0 / self.h_inv_scale


def _inv_scale(bound: float, top: float) -> float:
    if bound == 0.0 or not math.isfinite(bound):
        return 1.0
    return 2.0 ** math.floor(math.log2(top / bound))


def make_quantisation(g_bound: float, h_bound: float, bits: int, key: int) -> Quantisation:
    """The rounding of a tree whose rows have max |g| = g_bound and max |h| = h_bound,
    to `bits`-bit integers (bits >= 2)."""
    if bits < 2:
        raise ValueError(f"grad_quant_bits must be >= 2, got {bits}")
    top = float(2 ** (bits - 1) - 1)
    return Quantisation(_inv_scale(float(g_bound), top), _inv_scale(float(h_bound), top),
                        int(key), top)


def round_key(seed: int, round_: int, output: int) -> int:
    """A 64-bit key per (seed, round, output) for the counter-based rounding RNG."""
    return (np.random.SeedSequence([seed & 0xFFFFFFFF, round_, output])
            .generate_state(1, np.uint64)[0].item())


def sample_key(seed: int, round_: int) -> int:
    """A 64-bit key per (seed, round) for row subsampling (`kernels.cpu.sampling`), a
    stream apart from every `round_key`."""
    return (np.random.SeedSequence([seed & 0xFFFFFFFF, round_], spawn_key=(1,))
            .generate_state(1, np.uint64)[0].item())
