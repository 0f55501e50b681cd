"""What `histboost.train(..., comm=...)` needs beyond the backend wrapper: the limits of
this first version, one check that every rank bins with the same cuts, the global row index
of each local row, and the intercept from labels summed over all ranks. The global cuts
themselves are `histboost.distributed.cuts`."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ..kernels.cpu.backend import CPUBackend
from .backend import DistributedBackend

if TYPE_CHECKING:
    from ..collective.base import Communicator
    from ..data.binning import BinMapper
    from ..objectives.base import Objective
    from ..params import TrainParams


def check_supported(p: TrainParams, evals: Any, early_stopping_rounds: int | None) -> None:
    """Raise ValueError naming the first setting distributed training cannot run yet."""
    unsupported = [
        (not p.quantized_grad, "float histograms across workers (set quantized_grad=True)"),
        (p.subsample < 1.0, "row subsampling across workers (subsample < 1)"),
        (p.device != "cpu", f"device {p.device!r} across workers (only 'cpu')"),
        (bool(evals), "evaluation sets and metrics across workers (evals)"),
        (early_stopping_rounds is not None, "early stopping across workers"),
    ]
    for bad, what in unsupported:
        if bad:
            raise ValueError(f"distributed training (comm=...) does not support {what} yet")


def check_same_cuts(comm: Communicator, mapper: BinMapper) -> None:
    """Raise ValueError on every rank unless all ranks hold the same cuts: one allreduce of a
    checksum. Global cuts (no reference) are equal by construction; this catches ranks whose
    reference Datasets were binned differently (a reference on some ranks only is caught
    earlier, by `Dataset.construct`)."""
    digest = zlib.crc32(np.ascontiguousarray(mapper.cut_ptr, np.int64).tobytes())
    digest = zlib.crc32(np.ascontiguousarray(mapper.cut_values, np.float64).tobytes(), digest)
    # max and -min of the same value agree iff every rank has it; both ranks raise alike
    both = np.array([digest, -digest], np.int64)
    comm.allreduce(both, op="max", inplace=True)
    if both[0] != -both[1]:
        raise ValueError("distributed training needs the same cuts on every rank: the ranks' "
                         "reference Datasets have different cuts (give every rank a reference "
                         "binned identically, or none to compute global cuts from all rows)")


def global_row_ids(comm: Communicator, n_rows: int) -> np.ndarray:
    """int64 (n_rows,): this rank's rows as a block of the rows of all ranks in rank order
    (the rounding counter of quantised pairs: the model of one process on those rows)."""
    sizes = np.asarray(comm.allgather(np.array([n_rows], np.int64)), np.int64).reshape(-1)
    first = int(sizes[:comm.rank].sum())
    return np.arange(first, first + n_rows, dtype=np.int64)


def global_intercept(comm: Communicator, objective: Objective, y: np.ndarray,
                     w: np.ndarray | None) -> np.ndarray:
    """float64 (K,): the objective's intercept from the weighted mean label of all ranks
    (sum(w * y), sum(w) allreduced). Built-in objectives fit the intercept from that mean
    alone (squared error: the mean; logistic: its logit; softmax and custom: zeros)."""
    ww = np.ones_like(y) if w is None else w
    sums = np.array([float(np.dot(ww, y)), float(ww.sum())], np.float64)
    comm.allreduce(sums, op="sum", inplace=True)
    if sums[1] <= 0:
        raise ValueError("all weights are zero on every rank")
    return objective.base_margin(np.array([sums[0] / sums[1]]), None)


def make_distributed_backend(comm: Communicator, bins: np.ndarray, bin_offsets: np.ndarray, *,
                             n_threads: int, label: np.ndarray, weight: np.ndarray | None,
                             n_outputs: int, count_rows: bool) -> DistributedBackend:
    """A `DistributedBackend` over a CPU backend of this rank's binned rows (unpacked
    histograms, rounding at global row indices)."""
    local = CPUBackend(bins, bin_offsets, n_threads, label=label, weight=weight,
                       n_outputs=n_outputs, count_rows=count_rows, pack=False,
                       row_ids=global_row_ids(comm, int(bins.shape[0])))
    return DistributedBackend(local, comm)
