"""histboost: histogram gradient-boosted trees, collectives and hash embeddings.

The tree engine: `Dataset` (binned data), `train` (the boosting loop), `cv` (k-fold
cross-validation) and `Booster` (the model); scikit-learn estimators live in
`histboost.sklearn`, callbacks in `histboost.callback`.
"""

__version__ = "0.1.0"

from .booster import Booster  # noqa: E402
from .callback import LearningRateScheduler, TrainingCheckPoint  # noqa: E402
from .cross_validation import cv  # noqa: E402
from .data import Dataset  # noqa: E402
from .training import train  # noqa: E402

__all__ = ["Booster", "Dataset", "LearningRateScheduler", "TrainingCheckPoint", "__version__",
           "cv", "train"]
