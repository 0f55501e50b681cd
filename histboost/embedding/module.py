"""``HashEmbeddingBag``: an embedding bag over a dynamic int64 vocabulary.

Storage: a :class:`~.hash_table.HashTable` maps keys to dense rows ``0..size-1`` (in insertion
order), and the module keeps row-indexed tensors: ``weight[row_capacity, dim]`` (float32 or
bfloat16), ``row_slot[row_capacity + 1]`` (int32, the slot in which each key was first seen,
used to re-shard localized-slot checkpoints; the extra element absorbs writes for old rows)
and the per-row optimiser state that :mod:`.optim` registers with :meth:`state_tensor`.
Rows never move, so a row index stays valid while the table grows.

Autograd: the pooled output is produced by a ``torch.autograd.Function`` whose backward
accumulates a :class:`~._ops.RowSparseGrad` into ``module.sparse_grad`` instead of a dense
``weight.grad``; the sparse optimisers of :mod:`.optim` consume it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import _ops
from ._keys import as_int64_tensor
from .csr import CSRBatch, validate_csr
from .hash_table import HashTable
from .initializers import get_initializer, initial_vectors, initializer_config

COMBINERS = ("sum", "mean")
STORAGE_DTYPES = (torch.float32, torch.bfloat16)


class _PoolFunction(torch.autograd.Function):
    """Pooled bags with a row-sparse backward (``anchor`` is an empty leaf needing grad)."""

    @staticmethod
    def forward(ctx, anchor, module, rows, offsets, record, mean, all_known):  # noqa: ARG004
        ctx.module = module
        ctx.mean = mean
        ctx.all_known = all_known
        out = _ops.pool(module.weight, rows, offsets, mean, module.backend, record)
        ctx.save_for_backward(rows, offsets, record.key_bag)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        rows, offsets, key_bag = ctx.saved_tensors
        module = ctx.module
        use_cuda = _ops.use_cuda_kernels(module.weight, module.backend)
        grad = _ops.row_grad(rows, key_bag, offsets, grad_out, ctx.mean, use_cuda,
                             ctx.all_known)
        module._accumulate_grad(grad)
        return None, None, None, None, None, None, None


class HashEmbeddingBag(nn.Module):
    """Embedding bags over arbitrary int64 keys, inserting unseen keys while training.

    Args:
        embedding_dim: vector length ``D``.
        combiner: ``"sum"`` or ``"mean"`` of the vectors in each (sample, slot) bag.
        capacity: keys the table holds before it first grows; ``capacity`` weight rows are
            allocated up front (grown by doubling when passed).
        initializer: initial vector of a new key, a pure function of ``(seed, key)``: a name
            (``"uniform"`` = U(-0.05, 0.05), ``"normal"``, ``"zeros"``), an initialiser object
            of :mod:`.initializers` or a callable ``f(keys int64 [n], dim, seed) -> [n, dim]``.
        dtype: storage dtype, ``torch.float32`` or ``torch.bfloat16`` (outputs are float32).
        device: torch device of the table and weights.
        seed: initialiser seed; equal seeds give equal vectors for equal keys on any rank.
        load_factor, max_capacity: see :class:`~.hash_table.HashTable`.
        check_inputs: validate each CSR batch (one device sync on GPU); switch off in tuned
            training loops once the input pipeline is trusted.
        backend: ``"auto"`` (Numba-CUDA kernels for float32 storage on CUDA, torch otherwise),
            ``"torch"`` (torch ops everywhere) or ``"cuda"`` (require the kernels).

    In training mode (``module.train()``) lookups insert unseen keys; in ``module.eval()``
    mode they never insert and unknown keys contribute zero vectors (counted by ``mean``).
    """

    def __init__(
        self,
        embedding_dim: int,
        combiner: str = "sum",
        capacity: int = 1 << 20,
        initializer: Any = None,
        dtype: torch.dtype = torch.float32,
        device: Any = None,
        *,
        seed: int = 0,
        load_factor: float = 0.5,
        max_capacity: int | None = None,
        check_inputs: bool = True,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        if embedding_dim < 1:
            raise ValueError(f"embedding_dim must be >= 1, got {embedding_dim}")
        if combiner not in COMBINERS:
            raise ValueError(f"combiner must be one of {COMBINERS}, got {combiner!r}")
        if dtype not in STORAGE_DTYPES:
            raise ValueError(f"dtype must be torch.float32 or torch.bfloat16, got {dtype}")
        self.embedding_dim = int(embedding_dim)
        self.combiner = combiner
        self.dtype = dtype
        self.seed = int(seed)
        self.check_inputs = check_inputs
        self.backend = _ops.check_backend(backend)
        self.initializer = get_initializer(initializer)
        self.table = HashTable(capacity, load_factor, max_capacity, device)
        rows = max(1, min(capacity, self.table.capacity))
        self.weight = torch.empty((rows, self.embedding_dim), dtype=dtype, device=self.device)
        self.row_slot = torch.full((rows + 1,), -1, dtype=torch.int32, device=self.device)
        self._state: dict[str, tuple[torch.Tensor, float]] = {}
        self.sparse_grad: _ops.RowSparseGrad | None = None

    # ------------------------------------------------------------------ properties
    @property
    def device(self) -> torch.device:
        return self.table.device

    @property
    def num_embeddings(self) -> int:
        """Number of keys (rows) in the table."""
        return self.table.size

    @property
    def row_capacity(self) -> int:
        return self.weight.shape[0]

    def extra_repr(self) -> str:
        return (
            f"embedding_dim={self.embedding_dim}, combiner={self.combiner!r}, "
            f"num_embeddings={self.num_embeddings}, dtype={self.dtype}, device={self.device}"
        )

    # ------------------------------------------------------------------ row storage
    def state_tensor(self, name: str, tail: tuple[int, ...], dtype: torch.dtype,
                     fill: float = 0.0) -> torch.Tensor:
        """Per-row optimiser state ``[row_capacity, *tail]``, created filled with ``fill``.

        Rows inserted later start at ``fill`` too. Returns the live tensor (it is replaced,
        not resized, when the table grows: fetch it again after each forward).
        """
        if name not in self._state:
            t = torch.full((self.row_capacity, *tail), fill, dtype=dtype, device=self.device)
            self._state[name] = (t, fill)
        return self._state[name][0]

    def state_names(self) -> list[str]:
        return sorted(self._state)

    def _reserve_rows(self, n_rows: int) -> None:
        """Grow the row-indexed tensors to hold ``n_rows`` rows (doubling, amortised)."""
        cap = self.row_capacity
        if n_rows <= cap:
            return
        new_cap = max(n_rows, 2 * cap)

        def grown(t: torch.Tensor, fill: float | None) -> torch.Tensor:
            out = torch.empty((new_cap, *t.shape[1:]), dtype=t.dtype, device=t.device)
            out[:cap] = t[:cap]
            if fill is not None:
                out[cap:] = fill
            return out

        self.weight = grown(self.weight, None)
        slot = torch.full((new_cap + 1,), -1, dtype=torch.int32, device=self.device)
        slot[:cap] = self.row_slot[:cap]
        self.row_slot = slot
        self._state = {k: (grown(t, fill), fill) for k, (t, fill) in self._state.items()}

    def _init_rows(self, start: int, stop: int) -> None:
        keys = self.table.keys()[start:stop]
        self.weight[start:stop] = initial_vectors(
            self.initializer, keys, self.embedding_dim, self.seed, self.dtype
        )

    def rows(self, keys: torch.Tensor, insert: bool | None = None) -> torch.Tensor:
        """Table rows of ``keys`` (int64 ``[n]``): inserting unseen keys when ``insert``
        (default: ``self.training``), else ``-1`` for them. New rows get their initial
        vectors and fresh optimiser state."""
        insert = self.training if insert is None else insert
        if not insert:
            return self.table.lookup(keys)
        old = self.table.size
        rows = self.table.get_or_insert(keys)
        new = self.table.size
        if new > old:
            self._reserve_rows(new)
            self._init_rows(old, new)
        return rows

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        row_offsets: torch.Tensor | CSRBatch,
        keys: torch.Tensor | None = None,
        num_slots: int | None = None,
    ) -> torch.Tensor:
        """Pool the bags of a CSR batch.

        Args:
            row_offsets: int64 ``[B*S + 1]`` (or a :class:`~.csr.CSRBatch`, then leave
                ``keys`` and ``num_slots`` out).
            keys: int64 ``[nnz]``.
            num_slots: ``S``.

        Returns:
            float32 ``[B, S, embedding_dim]``; empty bags are zero vectors.
        """
        row_offsets, keys, num_slots = self.prepare_inputs(row_offsets, keys, num_slots)
        out = self.bags(row_offsets, keys, num_slots, self.combiner == "mean")
        return out.view(-1, num_slots, self.embedding_dim)

    def prepare_inputs(
        self, row_offsets: Any, keys: Any, num_slots: int | None
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Inputs of :meth:`forward` as int64 tensors on the table's device, validated when
        ``check_inputs``: ``(row_offsets [B*S + 1], keys [nnz], S)``."""
        if isinstance(row_offsets, CSRBatch):
            if keys is not None or num_slots is not None:
                raise TypeError("pass either a CSRBatch or (row_offsets, keys, num_slots)")
            row_offsets, keys, num_slots = row_offsets.row_offsets, row_offsets.keys, \
                row_offsets.num_slots
        if keys is None or num_slots is None:
            raise TypeError("forward needs row_offsets, keys and num_slots")
        # bools, floats and unsigned keys beyond int64 raise rather than being cast
        ro = as_int64_tensor(row_offsets, "row_offsets", self.device)
        k = as_int64_tensor(keys, "keys", self.device)
        if self.check_inputs:
            validate_csr(ro, k, num_slots)
        elif ro.ndim != 1 or k.ndim != 1 or (ro.numel() - 1) % num_slots:
            raise ValueError("row_offsets must be 1-D with B*num_slots + 1 entries, keys 1-D")
        return ro, k, int(num_slots)

    def bags(
        self,
        row_offsets: torch.Tensor,
        keys: torch.Tensor,
        num_slots: int,
        mean: bool,
        slot_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Pooled bags ``[B*S, dim]`` float32 for validated inputs (used by the distributed
        module too). ``slot_ids`` int64 ``[S]`` maps local slot columns to global slot ids for
        the ``row_slot`` record (default: identity)."""
        old = self.table.size
        inserting = self.training
        rows = self.rows(keys, insert=inserting)
        grew = self.table.size > old
        need_grad = torch.is_grad_enabled()
        record = None
        if need_grad or grew:
            if slot_ids is None:
                slot_ids = torch.arange(num_slots, dtype=torch.int32, device=self.device)
            record = _ops.KeyRecord(
                key_bag=torch.empty(keys.numel(), dtype=torch.int64, device=self.device),
                row_slot=self.row_slot if grew else None,
                old_size=old,
                num_slots=num_slots,
                slot_ids=slot_ids.to(device=self.device, dtype=torch.int32),
            )
        if not need_grad:
            return _ops.pool(self.weight, rows, row_offsets, mean, self.backend, record)
        anchor = torch.empty(0, device=self.device, requires_grad=True)
        return _PoolFunction.apply(anchor, self, rows, row_offsets, record, mean, inserting)

    def _accumulate_grad(self, grad: _ops.RowSparseGrad) -> None:
        self.sparse_grad = grad if self.sparse_grad is None else self.sparse_grad.merged(grad)

    def zero_grad(self, set_to_none: bool = True) -> None:  # noqa: ARG002 - torch signature
        """Drop the accumulated row-sparse gradient (and dense gradients of submodules)."""
        super().zero_grad(set_to_none=True)
        self.sparse_grad = None

    # ------------------------------------------------------------------ inspection / rows I/O
    def keys(self) -> torch.Tensor:
        """Key of each row: int64 ``[num_embeddings]`` (a copy)."""
        return self.table.keys().clone()

    def embeddings(self, keys: torch.Tensor) -> torch.Tensor:
        """Current vectors of ``keys`` (float32 ``[n, dim]``; zeros for unknown keys), no insert."""
        keys = as_int64_tensor(keys, "keys", self.device).reshape(-1)
        rows = self.table.lookup(keys)
        out = torch.zeros((keys.numel(), self.embedding_dim), device=self.device)
        known = rows >= 0
        out[known] = self.weight[rows[known]].float()
        return out

    def export_rows(self) -> dict[str, torch.Tensor]:
        """The table's content as CPU tensors: ``keys`` int64 ``[n]``, ``slots`` int32 ``[n]``,
        ``weight`` ``[n, dim]`` (storage dtype) and ``state.<name>`` per optimiser state."""
        n = self.table.size
        out = {
            "keys": self.table.keys().cpu().clone(),
            "slots": self.row_slot[:n].cpu().clone(),
            "weight": self.weight[:n].cpu().clone(),
        }
        for name, (t, _) in self._state.items():
            out[f"state.{name}"] = t[:n].cpu().clone()
        return out

    def import_rows(self, rows: dict[str, torch.Tensor], state_fill: dict[str, float]
                    | None = None) -> None:
        """Replace the content with :meth:`export_rows` output (keys must be distinct).

        ``state_fill`` gives the fill value of states to create when ``rows`` has them and the
        module does not (default 0).
        """
        keys = rows["keys"].to(self.device, torch.int64)
        n = keys.numel()
        self.table.load_keys(keys)
        cap = max(n, self.table.capacity, 1)
        fills = dict(state_fill or {})
        self.weight = torch.empty((cap, self.embedding_dim), dtype=self.dtype, device=self.device)
        self.weight[:n] = rows["weight"].to(self.device, self.dtype)
        self.row_slot = torch.full((cap + 1,), -1, dtype=torch.int32, device=self.device)
        if "slots" in rows:
            self.row_slot[:n] = rows["slots"].to(self.device, torch.int32)
        old_state, self._state = self._state, {}
        names = {k[len("state."):] for k in rows if k.startswith("state.")} | set(old_state)
        for name in names:
            src = rows.get(f"state.{name}")
            if name in old_state:
                like, fill = old_state[name]
                tail, dtype = like.shape[1:], like.dtype
            else:
                tail, dtype, fill = src.shape[1:], src.dtype, fills.get(name, 0.0)
            t = torch.full((cap, *tail), fill, dtype=dtype, device=self.device)
            if src is not None:
                t[:n] = src.to(self.device, dtype)
            self._state[name] = (t, fill)
        self.sparse_grad = None

    # ------------------------------------------------------------------ torch integration
    def get_extra_state(self) -> dict[str, Any]:
        """Table content and configuration for ``state_dict()`` (CPU tensors, no pickle of
        code: custom initialisers are stored by name only)."""
        state = self.export_rows()
        state["config"] = {
            "embedding_dim": self.embedding_dim,
            "combiner": self.combiner,
            "seed": self.seed,
            "initializer": initializer_config(self.initializer),
            "state_fill": {k: fill for k, (_, fill) in self._state.items()},
        }
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        cfg = state["config"]
        if cfg["embedding_dim"] != self.embedding_dim:
            raise ValueError(
                f"state has embedding_dim={cfg['embedding_dim']}, module has {self.embedding_dim}"
            )
        rows = {k: v for k, v in state.items() if k != "config"}
        self.import_rows(rows, cfg.get("state_fill"))

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001 - torch signature
        # nn.Module.to()/.cuda()/.cpu() reach the table through here; only the device follows
        # `fn`: storage dtypes stay as configured (model.half() must not touch the table).
        super()._apply(fn, recurse)
        probe = fn(torch.empty(0, device=self.device))
        if probe.device != self.device:
            self.to_device(probe.device)
        return self

    def to_device(self, device: Any) -> HashEmbeddingBag:
        """Move the table, weights and optimiser state to ``device`` (in place)."""
        device = torch.device(device)
        self.table.to(device)
        self.weight = self.weight.to(device)
        self.row_slot = self.row_slot.to(device)
        self._state = {k: (t.to(device), f) for k, (t, f) in self._state.items()}
        if self.sparse_grad is not None:
            g = self.sparse_grad
            self.sparse_grad = _ops.RowSparseGrad(g.rows.to(device), g.values.to(device))
        return self
