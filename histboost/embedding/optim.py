"""Sparse optimisers for :class:`~.module.HashEmbeddingBag`: update only the touched rows.

Each optimiser reads the row-sparse gradient that the module's backward accumulated (distinct
rows, duplicate keys already summed) and applies, row by row, exactly the update that the
matching ``torch.optim`` optimiser would apply to a parameter holding that row alone and
stepped only when the row is touched ("lazy" semantics, as in HugeCTR and TensorFlow's lazy
optimisers): untouched rows keep their values and state. Per-row state lives in the module
(:meth:`~.module.HashEmbeddingBag.state_tensor`), so it grows with the table, moves with it and
is saved by the checkpoints. In particular Adam counts steps per row, and its bias correction
uses the row's own count.

| class | torch reference | per-row state |
| --- | --- | --- |
| :class:`SparseSGD` | ``SGD(lr)`` | none |
| :class:`SparseSGD` ``momentum>0`` | ``SGD(lr, momentum)`` (dampening 0) | ``momentum_buffer`` |
| :class:`SparseSGD` ``nesterov`` | ``SGD(lr, momentum, nesterov=True)`` | ``momentum_buffer`` |
| :class:`SparseAdagrad` | ``Adagrad(lr, eps, initial_accumulator_value)`` | ``sum`` |
| :class:`SparseAdam` | ``Adam(lr, betas, eps)`` | ``exp_avg``, ``exp_avg_sq``, ``step`` |

``weight_decay`` adds ``weight_decay * w`` to the gradient of touched rows, as torch does.
Updates are computed in float32; bfloat16 storage is rounded once per update.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from . import _ops
from .module import HashEmbeddingBag


def _find_tables(modules: nn.Module | Iterable[nn.Module]) -> list[HashEmbeddingBag]:
    roots = [modules] if isinstance(modules, nn.Module) else list(modules)
    found: list[HashEmbeddingBag] = []
    for root in roots:
        for m in root.modules():
            if isinstance(m, HashEmbeddingBag) and all(m is not f for f in found):
                found.append(m)
    if not found:
        raise ValueError("no HashEmbeddingBag found in the modules given to the optimizer")
    return found


class SparseOptimizer:
    """Base class: holds the tables and one ``param_groups`` entry of hyperparameters.

    Args:
        modules: a module (searched recursively, so a whole model can be passed) or an
            iterable of modules holding :class:`~.module.HashEmbeddingBag` tables.

    ``param_groups[0]`` holds the hyperparameters and may be changed between steps (e.g. the
    learning rate by a schedule).
    """

    kind = ""

    def __init__(self, modules: nn.Module | Iterable[nn.Module], **hp: Any) -> None:
        if hp["lr"] < 0:
            raise ValueError(f"lr must be >= 0, got {hp['lr']}")
        if hp.get("weight_decay", 0.0) < 0:
            raise ValueError(f"weight_decay must be >= 0, got {hp['weight_decay']}")
        self.tables = _find_tables(modules)
        self.param_groups = [dict(hp)]

    @property
    def defaults(self) -> dict[str, Any]:
        return self.param_groups[0]

    def zero_grad(self) -> None:
        """Drop the tables' accumulated row-sparse gradients."""
        for t in self.tables:
            t.sparse_grad = None

    @torch.no_grad()
    def step(self) -> None:
        """Update the rows touched since the last :meth:`zero_grad` (gradients are kept, as in
        ``torch.optim``: call :meth:`zero_grad` before the next backward)."""
        hp = self.param_groups[0]
        for table in self.tables:
            grad = table.sparse_grad
            if grad is None or grad.rows.numel() == 0:
                continue
            state = self._state(table, hp)
            rows, values = grad.rows, grad.values
            if _ops.use_cuda_kernels(table.weight, table.backend):
                from . import _cuda_ops

                _cuda_ops.optimizer_update(self.kind, table.weight, state, rows,
                                           values.contiguous(), hp)
            else:
                w = table.weight[rows].float()
                g = values + hp["weight_decay"] * w if hp["weight_decay"] else values
                table.weight[rows] = self._update(w, g, rows, state, hp).to(table.dtype)

    def _state(self, table: HashEmbeddingBag, hp: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {}

    def _update(self, w: torch.Tensor, g: torch.Tensor, rows: torch.Tensor,
                state: dict[str, torch.Tensor], hp: dict[str, Any]) -> torch.Tensor:
        """New values of the rows ``w`` (float32 ``[U, dim]``) given gradients ``g``; updates
        ``state[...][rows]`` in place."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Hyperparameters (the per-row state is saved with the tables)."""
        return {"kind": type(self).__name__, "param_groups": [dict(self.param_groups[0])]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != type(self).__name__:
            raise ValueError(f"state is for {state.get('kind')}, not {type(self).__name__}")
        self.param_groups = [dict(state["param_groups"][0])]


class SparseSGD(SparseOptimizer):
    """SGD with optional (Nesterov) momentum, as ``torch.optim.SGD`` with dampening 0."""

    def __init__(self, modules: Any, lr: float = 0.01, momentum: float = 0.0,
                 nesterov: bool = False, weight_decay: float = 0.0) -> None:
        if momentum < 0:
            raise ValueError(f"momentum must be >= 0, got {momentum}")
        if nesterov and momentum <= 0:
            raise ValueError("nesterov needs momentum > 0")
        super().__init__(modules, lr=lr, momentum=momentum, nesterov=nesterov,
                         weight_decay=weight_decay)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "momentum" if self.param_groups[0]["momentum"] else "sgd"

    def _state(self, table, hp):
        if not hp["momentum"]:
            return {}
        dim = table.embedding_dim
        return {"momentum_buffer": table.state_tensor("momentum_buffer", (dim,), torch.float32)}

    def _update(self, w, g, rows, state, hp):
        if not hp["momentum"]:
            return w - hp["lr"] * g
        buf = state["momentum_buffer"]
        b = hp["momentum"] * buf[rows] + g
        buf[rows] = b
        upd = g + hp["momentum"] * b if hp["nesterov"] else b
        return w - hp["lr"] * upd


class SparseAdagrad(SparseOptimizer):
    """Adagrad, as ``torch.optim.Adagrad`` with ``lr_decay=0``."""

    kind = "adagrad"

    def __init__(self, modules: Any, lr: float = 0.01, eps: float = 1e-10,
                 initial_accumulator_value: float = 0.0, weight_decay: float = 0.0) -> None:
        if initial_accumulator_value < 0:
            raise ValueError("initial_accumulator_value must be >= 0")
        super().__init__(modules, lr=lr, eps=eps,
                         initial_accumulator_value=initial_accumulator_value,
                         weight_decay=weight_decay)

    def _state(self, table, hp):
        dim = table.embedding_dim
        return {"sum": table.state_tensor("sum", (dim,), torch.float32,
                                          hp["initial_accumulator_value"])}

    def _update(self, w, g, rows, state, hp):
        s = state["sum"][rows] + g * g
        state["sum"][rows] = s
        return w - hp["lr"] * g / (s.sqrt() + hp["eps"])


class SparseAdam(SparseOptimizer):
    """Adam, as ``torch.optim.Adam`` (L2 ``weight_decay``, no amsgrad) with per-row steps."""

    kind = "adam"

    def __init__(self, modules: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        super().__init__(modules, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

    def _state(self, table, hp):
        dim = table.embedding_dim
        return {
            "exp_avg": table.state_tensor("exp_avg", (dim,), torch.float32),
            "exp_avg_sq": table.state_tensor("exp_avg_sq", (dim,), torch.float32),
            "step": table.state_tensor("step", (), torch.int32),
        }

    def _update(self, w, g, rows, state, hp):
        b1, b2 = hp["betas"]
        t = (state["step"][rows] + 1).to(torch.int32)
        state["step"][rows] = t
        m = state["exp_avg"][rows]
        m = m + (1.0 - b1) * (g - m)
        v = b2 * state["exp_avg_sq"][rows] + (1.0 - b2) * g * g
        state["exp_avg"][rows] = m
        state["exp_avg_sq"][rows] = v
        t64 = t.to(torch.float64).unsqueeze(1)
        step_size = (hp["lr"] / (1.0 - b1**t64)).to(torch.float32)
        bc2_sqrt = (1.0 - b2**t64).sqrt().to(torch.float32)
        return w - step_size * (m / (v.sqrt() / bc2_sqrt + hp["eps"]))
