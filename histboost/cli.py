"""Command-line interface: ``histboost train | predict | dump`` (also ``python -m histboost``).

User errors (missing files, malformed data, invalid parameters, data too large for memory)
print one line ``histboost <command>: error: <message>`` to stderr and exit with status 2, as
argparse does for bad arguments; there is no traceback. Output files are written by
`histboost._files.atomic_write` (a temporary name in the target folder, renamed), so an
interrupted run never leaves a truncated file.

``predict`` (and ``train --valid``) match the columns of a CSV/TSV file with a header to the
model's feature names, in any order; without a header, columns are taken by position.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import IO, Any

import numpy as np

from . import __version__
from ._files import atomic_write
from .booster import Booster
from .collective.errors import CollectiveError
from .data.dataset import Dataset
from .data.io import FileData, load_data, read_query_file
from .params import parse_params
from .training import train

EXIT_USAGE = 2
FORMATS = ("auto", "csv", "tsv", "libsvm")


# -- argument parsing ------------------------------------------------------------------------------
def _column(text: str) -> int | str:
    """A column given on the command line: an integer index, else a header name."""
    try:
        return int(text)
    except ValueError:
        return text


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    key = key.strip()
    if key in ("eval_metric", "metric") and "," in value:
        return key, [m.strip() for m in value.split(",") if m.strip()]
    return key, value.strip()  # parse_params converts numbers and booleans itself


def _add_data_options(p: argparse.ArgumentParser, label_help: str,
                      label_default: int | None) -> None:
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="data file format (default: from the extension or the first line)")
    p.add_argument("--label-column", type=_column, default=label_default, metavar="COL",
                   help=label_help)
    header = p.add_mutually_exclusive_group()
    header.add_argument("--header", dest="header", action="store_true", default=None,
                        help="the first line of a CSV/TSV file holds column names")
    header.add_argument("--no-header", dest="header", action="store_false",
                        help="the first line of a CSV/TSV file is data")
    p.add_argument("--unstored", choices=("zero", "nan"), default="zero",
                   help="libsvm entries a line does not list: zeros (default) or missing "
                        "values (nan); the data stays sparse either way")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="histboost", description="Histogram gradient-boosted trees.",
        epilog="Data files: CSV, TSV (label first by default) or libsvm (label idx:val ...), "
               "optionally gzip-compressed. Run 'histboost COMMAND -h' for a command's options.")
    parser.add_argument("--version", action="version", version=f"histboost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    t = sub.add_parser("train", help="train a model on a data file",
                       description="Train a model; prints the evaluation metrics every "
                                   "round. Under torchrun (WORLD_SIZE > 1) every process "
                                   "trains on its block of the rows (DATA with '{rank}' in "
                                   "the name: its own file) and rank 0 writes the model.")
    t.add_argument("data", metavar="DATA", help="training data file")
    _add_data_options(t, "label column: 0-based index or header name (default: 0); libsvm "
                      "files always hold the label first", 0)
    t.add_argument("--weight-column", type=_column, metavar="COL",
                   help="row-weight column of a CSV/TSV file: index or header name")
    t.add_argument("--categorical", metavar="COLS",
                   help="categorical columns of a CSV/TSV file: comma-separated 0-based "
                        "indices (of the file's columns) or header names; their values are "
                        "categories (text), see docs/categorical.md")
    t.add_argument("--param", type=_key_value, action="extend", nargs="+", default=[],
                   metavar="KEY=VALUE",
                   help="training parameter, e.g. objective=binary:logistic max_depth=6 "
                        "eval_metric=auc,logloss (XGBoost names)")
    t.add_argument("--num-round", type=int, default=100, metavar="N",
                   help="boosting rounds (default: 100)")
    t.add_argument("--valid", action="append", default=[], metavar="DATA",
                   help="validation file in the same layout as DATA (repeatable)")
    t.add_argument("--query", metavar="PATH",
                   help="query file of DATA for the ranking objectives (LightGBM's format: "
                        "one query size a line, in row order); libsvm DATA may carry qid: "
                        "instead")
    t.add_argument("--valid-query", action="append", default=[], metavar="PATH",
                   help="query file of each --valid set, in the order of --valid")
    t.add_argument("--early-stopping-rounds", type=int, metavar="N",
                   help="stop when the last --valid set's last metric has not improved for N "
                        "rounds")
    t.add_argument("--model-out", required=True, metavar="PATH", help="model file to write")
    t.add_argument("--log-every", type=int, default=1, metavar="N",
                   help="print metrics every N rounds (default: 1)")
    t.add_argument("--quiet", action="store_true", help="print nothing but errors")
    t.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="under torchrun: seconds a collective call may wait for the other "
                        "ranks before the job stops with an error (default: 300)")

    p = sub.add_parser("predict", help="predict with a saved model",
                       description="Write one prediction per line (tab-separated class "
                                   "probabilities for multi:softprob, leaf ids with --leaf).")
    p.add_argument("model", metavar="MODEL", help="model file from 'histboost train'")
    p.add_argument("data", metavar="DATA", help="data file")
    _add_data_options(p, "drop this label column (index or header name) before predicting; "
                      "libsvm files always hold a label, which is dropped", None)
    p.add_argument("--out", required=True, metavar="PATH", help="predictions file to write")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--margin", action="store_true", help="raw margins instead of "
                      "probabilities / values")
    kind.add_argument("--leaf", action="store_true", help="leaf index of every tree")

    d = sub.add_parser("dump", help="print the trees of a model as text")
    d.add_argument("model", metavar="MODEL", help="model file")
    d.add_argument("--with-stats", action="store_true", help="include gain and cover")
    d.add_argument("--out", metavar="PATH", help="write to PATH instead of stdout")
    return parser


# -- helpers ---------------------------------------------------------------------------------------
def _note(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"histboost: {message}", file=sys.stderr, flush=True)


def _check_writable(path: str) -> None:
    """Fail before the work if the output folder does not exist (as `atomic_write` will)."""
    folder = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot write {path!r}: output folder {folder!r} does not "
                                "exist")
    if os.path.isdir(path):
        raise ValueError(f"output path {path!r} is a directory")


def _read(args: argparse.Namespace, path: str, label_column: int | str | None,
          weight_column: int | str | None = None, n_features: int | None = None) -> FileData:
    started = time.perf_counter()
    data = load_data(path, args.format, label_column=label_column, weight_column=weight_column,
                     header=args.header, n_features=n_features)
    n, f = data.X.shape
    _note(args, f"read {path}: {n} rows x {f} features ({time.perf_counter() - started:.2f} s)")
    return data


def _align_columns(data: FileData, names: list[str], path: str) -> FileData:
    """`data` with its feature columns in the order of the model's feature `names`, matched by
    the file's header; unchanged when the file has no header or the model no names (then
    columns are taken by position)."""
    header = data.feature_names
    if header is None or names == [f"f{i}" for i in range(len(names))]:
        return data._replace(feature_names=None)
    if header == names:
        return data
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise ValueError(f"{path}: the header names {dup[:5]} more than once")
    missing = [n for n in names if n not in header]
    extra = [h for h in header if h not in names]
    if missing or extra:
        hint = " (pass --label-column to drop the label column)" if not missing else ""
        raise ValueError(f"{path}: the header's columns differ from the model's features: "
                         f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
                         f"not in the model {extra[:5]}{' ...' if len(extra) > 5 else ''}"
                         f"{hint}")
    order = [header.index(n) for n in names]
    return data._replace(X=data.X[:, order], feature_names=list(names))


def _with_queries(data: FileData, query_path: str | None, data_path: str) -> FileData:
    """`data` with the query sizes of `query_path` (a LightGBM query file), if given."""
    if query_path is None:
        return data
    if data.group is not None:
        raise ValueError(f"{data_path} carries qid: fields and a query file was given too; "
                         "give the queries once")
    group = read_query_file(query_path)
    n = data.X.shape[0]
    if int(group.sum()) != n:
        raise ValueError(f"the query sizes in {query_path} sum to {int(group.sum())}, but "
                         f"{data_path} has {n} rows")
    return data._replace(group=group)


# -- commands --------------------------------------------------------------------------------------
def _world_size() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1") or 1)
    except ValueError:
        raise ValueError(f"WORLD_SIZE must be an integer, got "
                         f"{os.environ['WORLD_SIZE']!r}") from None


def _rank_block(data: FileData, rank: int, world: int) -> tuple[FileData, np.ndarray]:
    """Rows ``np.array_split`` block `rank` of `world` of data, and their row indices."""
    rows = np.array_split(np.arange(data.X.shape[0]), world)[rank]
    if rows.size == 0:
        raise ValueError(f"{data.X.shape[0]} rows cannot be split over {world} ranks")
    sub = {k: (None if v is None else v[rows[0]:rows[-1] + 1])
           for k, v in (("X", data.X), ("y", data.y), ("weight", data.weight))}
    if data.group is not None:
        raise ValueError("query groups cannot be split across ranks yet")
    return data._replace(**sub), rows


def _train(args: argparse.Namespace) -> int:
    if args.num_round < 0:
        raise ValueError(f"--num-round must be >= 0, got {args.num_round}")
    world = _world_size()
    comm = None
    if world > 1:
        from .collective import init

        comm = init(timeout=args.timeout)
        if comm.rank != 0:  # one rank reports and writes; the others print errors only
            args.quiet = True
    try:
        return _train_with(args, comm)
    finally:
        if comm is not None:
            comm.close()


def _train_with(args: argparse.Namespace, comm: Any) -> int:
    rank, world = (0, 1) if comm is None else (comm.rank, comm.world_size)
    if rank == 0:
        _check_writable(args.model_out)
    params = dict(args.param)
    if args.quiet:
        params.setdefault("verbosity", 0)
    with warnings.catch_warnings():  # check values before reading the data; train() warns
        warnings.simplefilter("ignore")
        parse_params(params)

    def read(path: str, n_features: int | None = None) -> FileData:
        """This rank's rows of `path` (its own file when the name holds {rank})."""
        if comm is not None and "{rank}" in path:
            return _read(args, path.format(rank=rank), args.label_column, args.weight_column,
                         n_features)
        data = _read(args, path, args.label_column, args.weight_column, n_features)
        return data if comm is None else _rank_block(data, rank, world)[0]

    if args.valid_query and len(args.valid_query) != len(args.valid):
        raise ValueError(f"{len(args.valid_query)} --valid-query files for {len(args.valid)} "
                         "--valid sets: give one per --valid set, in the same order")
    if comm is not None and (args.query or args.valid_query):
        raise ValueError("query files cannot be split across ranks yet: train ranking "
                         "objectives in one process")
    if args.categorical is not None:
        if args.header is False:
            raise ValueError("--categorical needs files with a header")
        if args.query or args.valid_query:
            raise ValueError("--categorical with --query: ranking on categorical features is "
                             "not supported yet")
        dtrain, evals = _categorical_sets(args, comm, rank, world)
    else:
        train_data = _with_queries(read(args.data), args.query, args.data)
        if train_data.y is None:
            raise ValueError("training data needs a label column")
        # with comm, train() computes the cuts of all ranks' rows, as one process would
        dtrain = train_data.to_dataset(unstored=args.unstored)
        evals = [(dtrain, "train")]
        for i, path in enumerate(args.valid):
            valid = read(path, dtrain.num_col())
            valid = _with_queries(valid, args.valid_query[i] if args.valid_query else None,
                                  path)
            valid = _align_columns(valid, dtrain.feature_names, path)
            name = "valid" if len(args.valid) == 1 else f"valid{i}"
            evals.append((valid.to_dataset(reference=dtrain, unstored=args.unstored), name))
    started = time.perf_counter()
    booster = train(params, dtrain, num_boost_round=args.num_round, evals=evals,
                    early_stopping_rounds=args.early_stopping_rounds,
                    verbose_eval=False if args.quiet else max(1, args.log_every), comm=comm)
    if rank == 0:  # every rank holds the same model; one writes it, atomically
        booster.save_model(args.model_out)
    best = ("" if booster.best_iteration is None
            else f", best iteration {booster.best_iteration} ({booster.best_score:.6g})")
    ranks = "" if comm is None else f" on {world} processes"
    _note(args, f"trained {booster.num_boosted_rounds()} rounds{ranks} in "
                f"{time.perf_counter() - started:.2f} s{best}; model written to "
                f"{args.model_out}")
    return 0


def _categorical_sets(args: argparse.Namespace, comm: Any, rank: int, world: int
                      ) -> tuple[Dataset, list[tuple[Dataset, str]]]:
    """The training Dataset and evaluation sets of files with ``--categorical`` columns (with
    comm: this rank's rows, a block of each file or its own file when the name holds
    {rank})."""
    from .data.categorical_io import parse_columns, read_categorical_csv

    cols = parse_columns(args.categorical)

    def read(path: str) -> Any:
        own = comm is not None and "{rank}" in path
        data = read_categorical_csv(path.format(rank=rank) if own else path, cols,
                                    label_column=args.label_column,
                                    weight_column=args.weight_column, header=args.header,
                                    format=args.format)
        return data if comm is None or own else _rank_block(data, rank, world)[0]

    data = read(args.data)
    if data.y is None:
        raise ValueError("training data needs a label column")
    cats = [str(c) for c in data.X.columns if data.X[c].dtype == object]
    dtrain = data.to_dataset(categorical_features=cats)
    evals = [(dtrain, "train")]
    for i, path in enumerate(args.valid):
        valid = read(path)
        name = "valid" if len(args.valid) == 1 else f"valid{i}"
        evals.append((valid.to_dataset(reference=dtrain, categorical_features=cats), name))
    return dtrain, evals


def _predict_categorical(args: argparse.Namespace, booster: Booster) -> Any:
    """Raw input of a model with categorical features (a DataFrame, columns by header name):
    its string categorical columns as text, the others numbers."""
    from .data.categorical_io import read_categorical_csv

    if args.header is False:
        raise ValueError("a model with categorical features reads files with a header (its "
                         "columns are matched by name)")
    cat = booster.categorical
    text = [c for c, k in zip(cat.columns, cat.kinds, strict=True) if k == "str"]
    return read_categorical_csv(args.data, text, label_column=args.label_column,
                                format=args.format).X


def _predict(args: argparse.Namespace) -> int:
    _check_writable(args.out)
    booster = Booster(model_file=args.model)
    if booster.categorical is not None:
        pred = booster.predict(_predict_categorical(args, booster), output_margin=args.margin,
                               pred_leaf=args.leaf)
        return _write_predictions(args, pred)
    data = _read(args, args.data, args.label_column, n_features=booster.num_features())
    F = data.X.shape[1]
    if F == booster.num_features() + 1 and args.label_column is None:
        raise ValueError(f"{args.data} has {F} columns but the model takes "
                         f"{booster.num_features()} features; pass --label-column to drop the "
                         "label column")
    # a header is matched by name, as the Python API matches a DataFrame's columns
    data = _align_columns(data, booster.feature_names, args.data)
    X = data.X if isinstance(data.X, np.ndarray) else Dataset(data.X, unstored=args.unstored)
    pred = booster.predict(X, output_margin=args.margin, pred_leaf=args.leaf)
    return _write_predictions(args, pred)


def _write_predictions(args: argparse.Namespace, pred: np.ndarray) -> int:
    # integers for leaves; enough digits that the text reads back to the same float
    fmt = "%d" if pred.dtype.kind in "iu" else ("%.9g" if pred.dtype == np.float32 else "%.17g")
    text = io.StringIO()
    np.savetxt(text, pred, fmt=fmt, delimiter="\t")
    atomic_write(args.out, text.getvalue())
    _note(args, f"wrote {pred.shape[0]} predictions to {args.out}")
    return 0


def _dump(args: argparse.Namespace) -> int:
    booster = Booster(model_file=args.model)
    text = "".join(f"booster[{i}]:\n{tree.rstrip()}\n"
                   for i, tree in enumerate(booster.get_dump(with_stats=args.with_stats)))
    if args.out is None:
        sys.stdout.write(text)
    else:
        _check_writable(args.out)
        atomic_write(args.out, text)
    return 0


_COMMANDS = {"train": _train, "predict": _predict, "dump": _dump}


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: IO[str] | None = None, line: str | None = None) -> None:
    print(f"histboost: warning: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    with warnings.catch_warnings():  # restores the default formatting on return
        warnings.showwarning = _show_warning
        try:
            return _COMMANDS[args.command](args)
        except CollectiveError as e:  # another rank failed, stalled or left (torchrun)
            print(f"histboost {args.command}: error: {e}", file=sys.stderr, flush=True)
            return 1
        except (OSError, ValueError, TypeError, OverflowError) as e:
            print(f"histboost {args.command}: error: {e}", file=sys.stderr, flush=True)
            return EXIT_USAGE
        except (MemoryError, RecursionError) as e:
            # resource errors: the input is too large or too deep for this machine
            what = "out of memory" if isinstance(e, MemoryError) else "input nested too deeply"
            detail = f" ({e})" if str(e) else ""
            print(f"histboost {args.command}: error: {what}{detail}", file=sys.stderr,
                  flush=True)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print(f"histboost {args.command}: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
