"""Split evaluation parameters and records shared by the growers and, later, by workers that
exchange best-split records through a collective."""

from __future__ import annotations

import numpy as np

from ..kernels.cpu.split import (  # noqa: F401  (re-exported record layout)
    P_ALPHA,
    P_LAMBDA,
    P_MCW,
    P_MDS,
    P_MIN_DATA,
    REC_BIN,
    REC_DEFAULT_LEFT,
    REC_FEATURE,
    REC_GAIN,
    REC_LEFT_C,
    REC_LEFT_G,
    REC_LEFT_H,
    REC_WIDTH,
    leaf_values,
    leaf_weight,
    node_gain,
)
from ..params import TrainParams

# A split must reduce the loss by more than this (XGBoost's kRtEps) to be made.
MIN_SPLIT_GAIN = 1e-6


def regularisation_vector(p: TrainParams) -> np.ndarray:
    """float64 (5,) in the kernels' P_* layout."""
    reg = np.zeros(5, np.float64)
    reg[P_LAMBDA] = p.reg_lambda
    reg[P_ALPHA] = p.reg_alpha
    reg[P_MDS] = p.max_delta_step
    reg[P_MCW] = p.min_child_weight
    reg[P_MIN_DATA] = p.min_data_in_leaf
    return reg


def better_split(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The better of two split records (float64 (REC_WIDTH,)): higher gain, ties to the lower
    feature index then the lower bin. A deterministic reducer for records found on different
    workers or feature blocks."""
    ka = (-a[REC_GAIN], a[REC_FEATURE] if a[REC_FEATURE] >= 0 else np.inf, a[REC_BIN])
    kb = (-b[REC_GAIN], b[REC_FEATURE] if b[REC_FEATURE] >= 0 else np.inf, b[REC_BIN])
    return a if ka <= kb else b
