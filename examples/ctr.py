"""Train a DeepFM click-through-rate model with hash embeddings; compare with nn.EmbeddingBag.

Data: Criteo-format rows (13 dense counts, 26 categorical ids, click label) from ``ctr_like``
in ``../shared/bench/synth.py`` (there is no Criteo sample in ``../shared/data``). The same
DeepFM (first-order terms + factorisation machine + MLP) is trained twice with identical dense
parts, optimisers and batches:

* sparse features in :class:`histboost.embedding.HashEmbeddingBag` tables, raw ids as keys,
  vocabulary discovered while training, trained with ``histboost.embedding.SparseAdam``;
* sparse features in ``torch.nn.EmbeddingBag`` tables over a vocabulary pre-built from the
  training set (unseen test ids map to a zero padding row), trained with
  ``torch.optim.SparseAdam``.

With ``--leaf-slots`` a histboost GBDT is first trained on the dense features and the leaf
index of every tree becomes one more categorical slot (``Booster.predict(pred_leaf=True)`` ->
``csr_from_leaf_indices``), the "GBDT + embedding" recipe. Test AUC and logloss are printed.

    python examples/ctr.py [--rows 300000] [--epochs 1] [--leaf-slots] [--device cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

import histboost
from histboost.embedding import (
    CSRBatch,
    HashEmbeddingBag,
    SparseAdam,
    concat_slots,
    csr_from_dense,
    csr_from_leaf_indices,
)
from histboost.metrics import auc, logloss

SYNTH = Path(__file__).resolve().parents[2] / "shared" / "bench" / "synth.py"


def load_ctr_like(path: Path, rows: int, seed: int):
    """``(dense float32 [n, 13], cats int64 [n, 26], y float32 [n])`` from synth.ctr_like."""
    spec = importlib.util.spec_from_file_location("synth", path)
    synth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synth)
    return synth.ctr_like(rows, seed=seed)


def leaf_slots(dense_tr, y_tr, dense_te, rounds: int, depth: int):
    """Leaf indices of a GBDT trained on the dense features: (train CSR, test CSR)."""
    params = {"objective": "binary:logistic", "max_depth": depth, "learning_rate": 0.1,
              "seed": 0, "verbosity": 0}
    booster = histboost.train(params, histboost.Dataset(dense_tr, label=y_tr),
                              num_boost_round=rounds, verbose_eval=False)
    tr, te = booster.predict(dense_tr, pred_leaf=True), booster.predict(dense_te, pred_leaf=True)
    num_leaves = int(max(tr.max(), te.max())) + 1  # node ids: bounded by the tree size
    p = booster.predict(dense_te)
    return (csr_from_leaf_indices(tr, num_leaves), csr_from_leaf_indices(te, num_leaves), p)


class VocabEmbeddingBag(nn.Module):
    """The baseline: ``nn.EmbeddingBag`` over a vocabulary fixed before training.

    Same call signature as ``HashEmbeddingBag``: ``(row_offsets, keys, num_slots) ->
    [B, S, dim]``. Row 0 is a zero padding row for keys outside the vocabulary.
    """

    def __init__(self, vocab: np.ndarray, dim: int, init_range: float, device) -> None:
        super().__init__()
        self.register_buffer("vocab", torch.as_tensor(np.unique(vocab), device=device))
        self.bag = nn.EmbeddingBag(len(self.vocab) + 1, dim, mode="sum", sparse=True,
                                   include_last_offset=True, padding_idx=0, device=device)
        with torch.no_grad():
            self.bag.weight.uniform_(-init_range, init_range)
            self.bag.weight[0] = 0

    def forward(self, row_offsets, keys, num_slots):
        pos = torch.searchsorted(self.vocab, keys).clamp(max=len(self.vocab) - 1)
        idx = torch.where(self.vocab[pos] == keys, pos + 1, 0)
        return self.bag(idx, row_offsets).view(-1, num_slots, self.bag.embedding_dim)


class DeepFM(nn.Module):
    """DeepFM over S sparse slots and D dense features.

    ``first``/``second``: embedding modules ``(row_offsets, keys, S) -> [B, S, 1]`` and
    ``[B, S, k]``. Output: click logits ``[B]``.
    """

    def __init__(self, first: nn.Module, second: nn.Module, n_slots: int, n_dense: int, k: int,
                 hidden: tuple[int, ...], base_rate: float) -> None:
        super().__init__()
        self.first, self.second = first, second
        # Start at the constant predictor: one epoch of Adam would not move a zero bias far
        # enough to reach a low click rate's logit.
        self.bias = nn.Parameter(torch.tensor(float(np.log(base_rate / (1.0 - base_rate)))))
        self.dense_linear = nn.Linear(n_dense, 1)
        layers: list[nn.Module] = []
        width = n_slots * k + n_dense
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, row_offsets, keys, n_slots, dense):
        lin = self.first(row_offsets, keys, n_slots).sum(dim=(1, 2))
        e = self.second(row_offsets, keys, n_slots)  # [B, S, k]
        fm = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1)
        deep = self.mlp(torch.cat([e.flatten(1), dense], dim=1)).squeeze(1)
        return self.bias + lin + fm + deep + self.dense_linear(dense).squeeze(1)


def batches(csr: CSRBatch, dense: np.ndarray, y: np.ndarray, size: int, order: np.ndarray,
            device):
    ro, keys, s = np.asarray(csr.row_offsets), np.asarray(csr.keys), csr.num_slots
    for lo in range(0, len(order), size):
        idx = order[lo: lo + size]
        if np.all(np.diff(idx) == 1):  # contiguous (evaluation): slice without copies
            sub = csr.slice_samples(int(idx[0]), int(idx[-1]) + 1)
            b_ro, b_keys = sub.row_offsets, sub.keys
        else:  # shuffled: gather the bags of the chosen samples
            rows = (idx[:, None] * s + np.arange(s)).reshape(-1)
            lengths = ro[rows + 1] - ro[rows]
            b_ro = np.concatenate([[0], np.cumsum(lengths)])
            b_keys = keys[np.repeat(ro[rows] - b_ro[:-1], lengths) + np.arange(b_ro[-1])]
        yield (torch.as_tensor(b_ro, device=device), torch.as_tensor(b_keys, device=device),
               torch.as_tensor(dense[idx], device=device), torch.as_tensor(y[idx], device=device))


def train_and_eval(kind: str, csr_tr, csr_te, dense_tr, dense_te, y_tr, y_te, args):
    torch.manual_seed(args.seed)  # identical dense parts for both kinds
    dev = torch.device(args.device)
    s = csr_tr.num_slots
    if kind == "hash":
        cap = 1 << 16
        first = HashEmbeddingBag(1, capacity=cap, initializer="zeros", device=dev, seed=1)
        second = HashEmbeddingBag(args.dim, capacity=cap, device=dev, seed=2,
                                  initializer={"name": "uniform", "low": -args.init_range,
                                               "high": args.init_range})
    else:
        vocab = np.asarray(csr_tr.keys)
        first = VocabEmbeddingBag(vocab, 1, 0.0, dev)  # U(0, 0): zeros, like "zeros"
        second = VocabEmbeddingBag(vocab, args.dim, args.init_range, dev)
    model = DeepFM(first, second, s, dense_tr.shape[1], args.dim, args.hidden,
                   float(y_tr.mean())).to(dev)
    dense_params = [p for n, p in model.named_parameters() if not n.startswith(("first",
                                                                                 "second"))]
    dense_opt = torch.optim.Adam(dense_params, lr=args.lr)
    if kind == "hash":
        sparse_opt = SparseAdam(model, lr=args.lr)
    else:
        sparse_opt = torch.optim.SparseAdam([first.bag.weight, second.bag.weight], lr=args.lr)
    loss_fn = nn.BCEWithLogitsLoss()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    model.train()
    for _ in range(args.epochs):
        for ro, keys, dense, y in batches(csr_tr, dense_tr, y_tr, args.batch,
                                          rng.permutation(len(y_tr)), dev):
            dense_opt.zero_grad()
            sparse_opt.zero_grad()
            loss = loss_fn(model(ro, keys, s, dense), y)
            loss.backward()
            dense_opt.step()
            sparse_opt.step()
    seconds = time.perf_counter() - t0
    model.eval()
    preds = []
    with torch.no_grad():
        for ro, keys, dense, _ in batches(csr_te, dense_te, y_te, 8192,
                                          np.arange(len(y_te)), dev):
            preds.append(torch.sigmoid(model(ro, keys, s, dense)).cpu().numpy())
    p = np.concatenate(preds).astype(np.float64)
    rows = second.num_embeddings if kind == "hash" else len(second.vocab) + 1
    return auc(y_te, p), logloss(y_te, p), seconds, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--hidden", type=int, nargs="*", default=[64])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--init-range", type=float, default=0.05)
    ap.add_argument("--leaf-slots", action="store_true",
                    help="add histboost GBDT leaf indices as extra slots")
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--tree-depth", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--synth", type=Path, default=SYNTH, help="path of synth.py")
    args = ap.parse_args()
    args.hidden = tuple(args.hidden)

    dense, cats, y = load_ctr_like(args.synth, args.rows, args.seed)
    dense = np.log1p(dense).astype(np.float32)
    n_te = int(len(y) * args.test_fraction)
    n_tr = len(y) - n_te
    print(f"ctr_like: {n_tr} train / {n_te} test rows, 13 dense + 26 categorical, "
          f"click rate {y.mean():.3f}")
    csr_tr, csr_te = csr_from_dense(cats[:n_tr]), csr_from_dense(cats[n_tr:])
    variants = [("", csr_tr, csr_te)]
    if args.leaf_slots:
        t0 = time.perf_counter()
        leaf_tr, leaf_te, p_gbdt = leaf_slots(dense[:n_tr], y[:n_tr], dense[n_tr:],
                                              args.trees, args.tree_depth)
        print(f"GBDT on the dense features ({args.trees} trees, depth {args.tree_depth}, "
              f"{time.perf_counter() - t0:.1f}s): test AUC {auc(y[n_tr:], p_gbdt):.4f}, "
              f"logloss {logloss(y[n_tr:], p_gbdt):.4f}")
        variants.append((" + leaf slots", concat_slots(csr_tr, leaf_tr),
                         concat_slots(csr_te, leaf_te)))

    print(f"\n{'model':46s} {'AUC':>7s} {'logloss':>8s} {'rows':>9s} {'train s':>8s}")
    for suffix, tr, te in variants:
        for kind, name in (("vocab", "DeepFM, nn.EmbeddingBag (vocab)"),
                           ("hash", "DeepFM, HashEmbeddingBag")):
            a, ll, sec, rows = train_and_eval(kind, tr, te, dense[:n_tr], dense[n_tr:],
                                              y[:n_tr], y[n_tr:], args)
            print(f"{name + suffix:46s} {a:7.4f} {ll:8.4f} {rows:9d} {sec:8.1f}", flush=True)


if __name__ == "__main__":
    main()
