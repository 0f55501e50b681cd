"""Block layouts and rank maps shared by the algorithms.

Blocks: a buffer of ``n`` elements is cut into one block per rank the way
``numpy.array_split`` cuts it (the first ``n % p`` blocks one record longer), never inside a
record. ``counts``/``offsets`` are in elements.

`Fold` is the non-power-of-two step of recursive doubling/halving (LightGBM, Rabenseifner):
with ``k`` the largest power of two <= ``p`` and ``rem = p - k``, ranks ``2i`` and ``2i+1``
(``i < rem``) form a pair that acts as one *virtual rank* ``i`` (the even rank leads, the odd
one hands its data over before and gets the result after); rank ``r >= 2*rem`` is virtual rank
``r - rem``. Each virtual rank covers a contiguous run of real ranks, hence of blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

SINGLE, LEADER, FOLLOWER = "single", "leader", "follower"


def split_counts(n_items: int, parts: int, item_size: int = 1) -> list[int]:
    """Element counts of ``parts`` blocks of ``n_items`` items of ``item_size`` elements,
    as ``numpy.array_split`` sizes them."""
    q, r = divmod(n_items, parts)
    return [(q + (i < r)) * item_size for i in range(parts)]


def offsets_of(counts: list[int]) -> list[int]:
    """Start of each block; one extra entry holds the total."""
    out = [0]
    for c in counts:
        out.append(out[-1] + c)
    return out


def is_power_of_two(p: int) -> bool:
    return p > 0 and p & (p - 1) == 0


@dataclass(frozen=True)
class Fold:
    """Virtual ranks for recursive doubling/halving on any world size ``p``."""

    p: int

    @property
    def k(self) -> int:
        """Number of virtual ranks: the largest power of two <= p."""
        return 1 << (self.p.bit_length() - 1)

    @property
    def rem(self) -> int:
        return self.p - self.k

    def role(self, rank: int) -> tuple[str, int, int]:
        """(role, virtual rank, pair partner or -1) of a real rank. A follower's virtual rank
        is its leader's."""
        if rank < 2 * self.rem:
            if rank % 2 == 0:
                return LEADER, rank // 2, rank + 1
            return FOLLOWER, rank // 2, rank - 1
        return SINGLE, rank - self.rem, -1

    def real(self, v: int) -> int:
        """The real rank that acts for virtual rank ``v`` (the pair's leader)."""
        return 2 * v if v < self.rem else v + self.rem

    def first_real(self, v: int) -> int:
        """First real rank covered by virtual rank ``v`` (``v == k`` gives ``p``)."""
        return 2 * v if v < self.rem else v + self.rem

    def span(self, v0: int, v1: int, offsets: list[int]) -> tuple[int, int]:
        """Element range covered by virtual ranks [v0, v1)."""
        return offsets[self.first_real(v0)], offsets[self.first_real(v1)]


def rel_ranges(rel_lo: int, rel_hi: int, root: int, p: int) -> list[tuple[int, int]]:
    """Real-rank runs [a, b) covering relative ranks [rel_lo, rel_hi) of a tree rooted at
    ``root`` (relative rank = (rank - root) mod p); at most two runs, as the range may wrap."""
    if rel_lo >= rel_hi:
        return []
    a, b = (rel_lo + root) % p, (rel_hi + root) % p
    if rel_hi - rel_lo == p:
        return [(root, p), (0, root)] if root else [(0, p)]
    if a < b or b == 0:
        return [(a, b or p)]
    return [(a, p), (0, b)]
