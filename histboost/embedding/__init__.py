"""Hash embeddings for CTR models: dynamic int64 vocabularies, sparse optimisers, sharding.

Needs torch (``pip install histboost[distributed]``); nothing outside this package imports it.

* :class:`HashEmbeddingBag` — embedding bags over arbitrary int64 keys, ``[batch, slots, dim]``
  output, row-sparse gradients; keys are inserted on first sight while training.
* :class:`SparseSGD` (plain, momentum, Nesterov), :class:`SparseAdagrad`, :class:`SparseAdam` —
  update only the touched rows, duplicate keys summed first.
* :class:`DistributedHashEmbeddingBag` — the same module sharded over a ``histboost.collective``
  communicator, in HugeCTR's ``distributed_slot`` and ``localized_slot`` layouts.
* :func:`save_checkpoint` / :func:`load_checkpoint` (re-sharding to any world size),
  :func:`export_inference` / :func:`load_inference`.
* CSR input helpers: :func:`csr_from_lists`, :func:`csr_from_pandas`, :func:`csr_from_dense`,
  :func:`csr_from_leaf_indices` (boosted-tree leaves as slots), :func:`concat_slots`.
"""

from ._ops import RowSparseGrad
from .checkpoint import export_inference, load_checkpoint, load_inference, save_checkpoint
from .csr import (
    CSRBatch,
    CSRValidationError,
    concat_slots,
    csr_from_dense,
    csr_from_leaf_indices,
    csr_from_lists,
    csr_from_pandas,
    stable_hash_strings,
    validate_csr,
)
from .distributed import DistributedHashEmbeddingBag
from .hash_table import CapacityError, HashTable, ReservedKeyError
from .initializers import ConstantInitializer, NormalInitializer, UniformInitializer
from .module import HashEmbeddingBag
from .optim import SparseAdagrad, SparseAdam, SparseOptimizer, SparseSGD

__all__ = [
    "CSRBatch",
    "CSRValidationError",
    "CapacityError",
    "ConstantInitializer",
    "DistributedHashEmbeddingBag",
    "HashEmbeddingBag",
    "HashTable",
    "NormalInitializer",
    "ReservedKeyError",
    "RowSparseGrad",
    "SparseAdagrad",
    "SparseAdam",
    "SparseOptimizer",
    "SparseSGD",
    "UniformInitializer",
    "concat_slots",
    "csr_from_dense",
    "csr_from_leaf_indices",
    "csr_from_lists",
    "csr_from_pandas",
    "export_inference",
    "load_checkpoint",
    "load_inference",
    "save_checkpoint",
    "stable_hash_strings",
    "validate_csr",
]
