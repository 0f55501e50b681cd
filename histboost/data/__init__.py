"""Data ingestion: quantile binning (`binning`), the `Dataset`, sparse input (`sparse`), and file
readers (`io`)."""

from .binning import BinMapper, compute_bin_mapper
from .dataset import Dataset, to_float_matrix
from .io import FileData, detect_format, load_data, read_csv, read_libsvm
from .sparse import SparseBins, SparseMatrix

__all__ = ["BinMapper", "Dataset", "compute_bin_mapper", "to_float_matrix"]
__all__ += ["FileData", "detect_format", "load_data", "read_csv", "read_libsvm"]
__all__ += ["SparseBins", "SparseMatrix"]
