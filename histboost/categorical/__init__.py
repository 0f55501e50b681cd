"""Categorical features: ordered target statistics with priors, frequencies, one-hot
indicators and feature combinations (docs/categorical.md).

- `histboost.data.categorical`: categorical input columns and their stable hashes;
- `histboost.kernels.cpu.target_stats`: the ordered statistics (sort, scan, scatter);
- `settings`: which statistics (`CtrSettings`); `model`: the model's categorical part, its
  final tables and the extended matrix at prediction; `training`: the derived columns of the
  training matrix, per tree.
"""
