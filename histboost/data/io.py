"""Readers for delimited text (CSV, TSV, whitespace) and libsvm / svmlight files.

Every reader returns a `FileData` named tuple ``(X, y, group, weight, feature_names)``:

- CSV / TSV: X is a dense float64 (n, F) array. The delimiter comes from the extension
  (``.csv``, ``.tsv``/``.tab``) or is sniffed from the first line (tab, comma, else whitespace);
  a header is detected when the first line has a field that is not a number. Empty fields and
  the usual NA spellings (``NA``, ``N/A``, ``null``, ``None``, ``?``) become NaN.
- libsvm: ``label [qid:q] index:value ...`` lines. X is a float64 scipy CSR matrix (a
  `histboost.data.sparse.SparseMatrix` when scipy is not installed), never densified: a
  `Dataset` of it reads the entries a line does not list by its ``unstored`` rule (zeros by
  default, or missing values). Indices are 0- or 1-based, detected as XGBoost and
  scikit-learn do (1-based when no index 0 occurs); ``qid`` runs become query group sizes.

Files may be gzip-compressed (``.gz``) and start with a UTF-8 byte-order mark, which is ignored.
Blank lines (whitespace only) and ``#`` comments are skipped. Malformed input raises ValueError
naming the file and line; a missing file raises FileNotFoundError.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import os
import re
import warnings
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

import numpy as np

from . import _text_scan as _scan
from .dataset import Dataset, qid_runs
from .sparse import SparseMatrix, check_width

PathLike = str | os.PathLike

# Lower-cased spellings of a missing value in delimited text (besides "nan", which numpy reads).
NA_STRINGS = ("", "na", "n/a", "null", "none", "?")
_NA_PATTERN = r"(?:NA|N/A|null|NULL|None|\?)"
_DELIMITER_BY_EXT = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
_LIBSVM_EXTS = (".svm", ".libsvm", ".svmlight")
# libsvm files are parsed in line-aligned chunks of about this many bytes, which bounds the
# scanner's scratch arrays (sized for the worst case of a chunk) to a few times this size.
_CHUNK_BYTES = 1 << 25


class FileData(NamedTuple):
    """What a reader returns.

    Attributes
    ----------
    X : float64 ndarray (n, F), or float64 scipy CSR matrix (n, F) for libsvm files
        (`SparseMatrix` without scipy).
    y : float64 (n,) labels, or None when the file has no label column.
    group : int64 query sizes (from libsvm ``qid``), or None.
    weight : float64 (n,) row weights (from a weight column), or None.
    feature_names : names from a CSV header, or None.
    """

    X: Any
    y: np.ndarray | None
    group: np.ndarray | None = None
    weight: np.ndarray | None = None
    feature_names: list[str] | None = None

    def to_dataset(self, **kwargs: Any) -> Dataset:
        """A `Dataset` of this data; `kwargs` go to `Dataset` (``max_bin``, ``reference``,
        ``unstored``)."""
        return Dataset(self.X, label=self.y, weight=self.weight, group=self.group,
                       feature_names=self.feature_names, **kwargs)


# -- common helpers ------------------------------------------------------------------------------
def _check_path(path: PathLike) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"data file {path!r} is a directory")
    return path


def _open(path: str, mode: str = "rb", encoding: str | None = None) -> IO[Any]:
    if path.endswith(".gz"):
        return gzip.open(path, mode, encoding=encoding)
    return open(path, mode, encoding=encoding)


def _strip_bom(raw: bytes) -> bytes:
    """`raw` without a leading UTF-8 byte-order mark (which some editors write): it would make
    the first field unreadable as a number or a column name."""
    return raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw


def _base_ext(path: str) -> str:
    """Lower-case extension, ignoring a trailing ``.gz``."""
    root = path[:-3] if path.endswith(".gz") else path
    return os.path.splitext(root)[1].lower()


def _first_lines(path: str, limit: int = 2) -> list[tuple[int, str]]:
    """Up to `limit` (line number, text) pairs of the first non-blank, non-comment lines."""
    out: list[tuple[int, str]] = []
    try:
        with _open(path, "rt", encoding="utf-8-sig") as f:
            for lineno, line in enumerate(f, 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    out.append((lineno, line.rstrip("\r\n")))
                    if len(out) == limit:
                        break
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as e:
        raise ValueError(f"{path} is not a readable text file: {e}") from None
    return out


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _resolve_column(col: int | str, names: list[str] | None, n_cols: int, what: str,
                    path: str) -> int:
    if isinstance(col, str):
        if names is None:
            raise ValueError(f"{what} {col!r} is a name but {path} has no header line")
        if col not in names:
            raise ValueError(f"{what} {col!r} is not a column of {path}; columns are "
                             f"{names[:10]}{' ...' if len(names) > 10 else ''}")
        return names.index(col)
    if not isinstance(col, int | np.integer) or isinstance(col, bool):
        raise TypeError(f"{what} must be a column index or name, got {col!r}")
    if not -n_cols <= col < n_cols:
        raise ValueError(f"{what} {col} is out of range: {path} has {n_cols} columns")
    return int(col) % n_cols


# -- format detection ----------------------------------------------------------------------------
def detect_format(path: PathLike) -> str:
    """``"libsvm"``, ``"csv"`` or ``"tsv"``: from the extension, else from the first line.

    A line whose fields after the first look like ``index:value`` is libsvm; otherwise the
    file is delimited text (``"tsv"`` when the line has a tab).
    """
    path = _check_path(path)
    ext = _base_ext(path)
    if ext in _LIBSVM_EXTS:
        return "libsvm"
    if ext in _DELIMITER_BY_EXT:
        return "csv" if _DELIMITER_BY_EXT[ext] == "," else "tsv"
    lines = _first_lines(path, 1)
    if not lines:
        raise ValueError(f"{path} contains no data rows")
    tokens = lines[0][1].split()
    if len(tokens) > 1 and all(re.fullmatch(r"[^:,]+:[^:,]+", t) for t in tokens[1:]):
        return "libsvm"
    return "tsv" if "\t" in lines[0][1] else "csv"


def load_data(path: PathLike, format: str = "auto", *, label_column: int | str | None = 0,
              weight_column: int | str | None = None, header: bool | None = None,
              delimiter: str | None = None, n_features: int | None = None,
              zero_based: bool | str = "auto") -> FileData:
    """Read a CSV / TSV / libsvm file (`format` ``"auto"`` detects it, see `detect_format`).

    `label_column`, `weight_column`, `header` and `delimiter` apply to delimited text (see
    `read_csv`); `n_features` and `zero_based` to libsvm (see `read_libsvm`), whose label is
    always the first field of a line.
    """
    fmt = detect_format(path) if format == "auto" else format
    if format in ("csv", "tsv") and delimiter is None:
        delimiter = "," if format == "csv" else "\t"
    if fmt == "libsvm":
        if label_column not in (0, None):
            raise ValueError(f"label column {label_column!r} does not apply to a libsvm file, "
                             "whose lines start with the label")
        if weight_column is not None:
            raise ValueError("a weight column is only supported for CSV / TSV files; libsvm "
                             "lines hold only a label and index:value pairs")
        return read_libsvm(path, n_features=n_features, zero_based=zero_based)
    if fmt in ("csv", "tsv"):
        return read_csv(path, label_column=label_column, weight_column=weight_column,
                        header=header, delimiter=delimiter)
    raise ValueError(f"format must be 'auto', 'csv', 'tsv' or 'libsvm', got {format!r}")


# -- delimited text ------------------------------------------------------------------------------
def _sniff_delimiter(path: str, first_line: str) -> str | None:
    ext = _base_ext(path)
    if ext in _DELIMITER_BY_EXT:
        return _DELIMITER_BY_EXT[ext]
    if "\t" in first_line:
        return "\t"
    if "," in first_line:
        return ","
    return None  # runs of whitespace


def _split_fields(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    return next(csv.reader([line], delimiter=delimiter))


def _na_fixer(delimiter: str | None) -> re.Pattern[bytes]:
    """Regex for one line: empty or NA fields after a delimiter, a first field followed by a
    delimiter, a lone NA token in a one-column file. Blank lines do not match."""
    if delimiter is None:  # runs of whitespace: no empty fields, only NA tokens
        return re.compile(rb"(?<!\S)%s(?!\S)" % _NA_PATTERN.encode())
    d = re.escape(delimiter.encode())
    pad = b"[ ]*" if delimiter == "\t" else rb"[ \t]*"
    na = _NA_PATTERN.encode()
    field = pad + na + b"?" + pad
    return re.compile(rb"(?<=%s)%s(?=%s|\r?$)|^%s(?=%s)|^%s%s%s\r?$"
                      % (d, field, d, field, d, pad, na, pad))


def _blanks(delimiter: str | None) -> bytes:
    """The bytes a blank line may hold: whitespace other than the delimiter (a tab-separated
    line of tabs is a row of empty fields, not a blank line)."""
    return b" \t\r\v\f".replace(delimiter.encode(), b"") if delimiter else b" \t\r\v\f"


def _normalize_na(raw: bytes, delimiter: str | None) -> bytes:
    """`raw` with empty fields and NA spellings replaced by ``nan`` (which numpy parses), and
    lines of blanks emptied (numpy skips empty lines; as pandas, blank lines are no rows)."""
    # a numba pass finds the lines that may need a fix; the regex then runs on those only
    a = np.frombuffer(raw, dtype=np.uint8)
    starts = np.empty(raw.count(b"\n") + 1, dtype=np.int64)
    ends = np.empty_like(starts)
    # 256 matches no byte: whitespace-separated text has no empty fields
    found = _scan.na_suspect_lines(a, 256 if delimiter is None else ord(delimiter), starts, ends)
    if found == 0:
        return raw
    starts, ends = starts[:found], ends[:found]
    fixer = _na_fixer(delimiter)
    blanks = _blanks(delimiter)
    parts, done = [], 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        line = raw[start:end]
        parts += [raw[done:start], b"" if not line.strip(blanks) else fixer.sub(b"nan", line)]
        done = end
    parts.append(raw[done:])
    return b"".join(parts)


def _loadtxt(source: Any, delimiter: str | None, skiprows: int) -> np.ndarray:
    return np.loadtxt(source, dtype=np.float64, delimiter=delimiter, skiprows=skiprows,
                      ndmin=2, quotechar='"' if delimiter is not None else None,
                      comments="#", encoding="utf-8")


def _diagnose_csv(path: str, delimiter: str | None, skiprows: int, error: Exception) -> None:
    """Raise a ValueError naming the first malformed line (numpy's message counts data rows,
    not file lines)."""
    n_cols = None
    blanks = _blanks(delimiter).decode()
    with _open(path, "rt", encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, 1):
            if lineno <= skiprows:
                continue
            text = line.split("#", 1)[0].rstrip("\r\n")
            if not text.strip(blanks):
                continue
            fields = _split_fields(text, delimiter)
            if n_cols is None:
                n_cols = len(fields)
            elif len(fields) != n_cols:
                raise ValueError(f"{path}:{lineno}: expected {n_cols} fields, found "
                                 f"{len(fields)}") from None
            for j, field in enumerate(fields):
                if field.strip().lower() not in NA_STRINGS and not _is_number(field):
                    raise ValueError(f"{path}:{lineno}: column {j} value {field!r} is not a "
                                     f"number (encode categorical columns as numbers "
                                     f"first)") from None
    raise ValueError(f"{path}: {error}") from None


def _read_matrix(path: str, delimiter: str | None, skiprows: int) -> np.ndarray:
    """float64 (n, C) matrix of a delimited file: NA spellings rewritten as ``nan``, then one
    pass of numpy's C parser."""
    try:
        with _open(path, "rb") as f:
            raw = _normalize_na(_strip_bom(f.read()), delimiter)
    except (gzip.BadGzipFile, EOFError) as e:
        raise ValueError(f"{path} is not a readable file: {e}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpy warns on files without rows
        try:
            return _loadtxt(io.BytesIO(raw), delimiter, skiprows)
        except ValueError as e:
            _diagnose_csv(path, delimiter, skiprows, e)
            raise  # unreachable: _diagnose_csv always raises


def read_csv(path: PathLike, *, label_column: int | str | None = 0,
             weight_column: int | str | None = None, header: bool | None = None,
             delimiter: str | None = None) -> FileData:
    """Read a delimited text file of numbers.

    Parameters
    ----------
    path : file name (``.gz`` is decompressed).
    label_column : index (0-based, negative counts from the end) or header name of the label
        column, or None when the file has no label.
    weight_column : index or name of a row-weight column, or None.
    header : whether the first line holds column names; None detects it (a field that is not
        a number or an NA spelling).
    delimiter : field separator; None takes it from the extension or the first line (tab,
        comma, else runs of whitespace).

    Returns
    -------
    FileData with X float64 (n, F) (the label and weight columns removed), y, weight and
    feature_names (from the header).
    """
    path = _check_path(path)
    if delimiter is not None and len(delimiter) != 1:
        raise ValueError(f"delimiter must be one character, got {delimiter!r}")
    lines = _first_lines(path, 1)
    if not lines:
        raise ValueError(f"{path} contains no data rows")
    first_lineno, first = lines[0]
    if delimiter is None:
        delimiter = _sniff_delimiter(path, first)
    fields = [f.strip() for f in _split_fields(first, delimiter)]
    if header is None:
        header = not all(f.lower() in NA_STRINGS or _is_number(f) for f in fields)
    names = fields if header else None
    n_cols = len(fields)
    drop = []
    if label_column is not None:
        drop.append(_resolve_column(label_column, names, n_cols, "label_column", path))
    if weight_column is not None:
        drop.append(_resolve_column(weight_column, names, n_cols, "weight_column", path))
        if len(drop) == 2 and drop[0] == drop[1]:
            raise ValueError("label_column and weight_column are the same column")
    keep = [j for j in range(n_cols) if j not in drop]
    if not keep:
        raise ValueError(f"{path} has no feature columns besides the label / weight")
    M = _read_matrix(path, delimiter, first_lineno if header else first_lineno - 1)
    if M.shape[0] == 0:
        raise ValueError(f"{path} contains no data rows")
    if M.shape[1] != n_cols:
        raise ValueError(f"{path}: line {first_lineno} has {n_cols} fields but the data rows "
                         f"have {M.shape[1]}")
    y = M[:, drop[0]].copy() if label_column is not None else None
    w = M[:, drop[-1]].copy() if weight_column is not None else None
    X = np.ascontiguousarray(M[:, keep]) if drop else M
    feature_names = [names[j] for j in keep] if names is not None else None
    return FileData(X, y, None, w, feature_names)


# -- libsvm --------------------------------------------------------------------------------------
_SCAN_ERRORS = {
    _scan.BAD_LABEL: "the label is not a number",
    _scan.BAD_PAIR: "expected index:value pairs after the label",
    _scan.BAD_INDEX: "a feature index must be a non-negative integer",
    _scan.BAD_VALUE: "a feature value is not a number",
    _scan.BAD_QID: "qid must be a non-negative integer, once per line",
}


class _Chunk(NamedTuple):
    labels: np.ndarray  # float64 (rows,)
    qid: np.ndarray  # int64 (rows,), -1 where a line has none
    nnz: np.ndarray  # int64 (rows,) pairs per row
    lines: np.ndarray  # int64 (rows,) 0-based line of each row in the file
    indices: np.ndarray  # int64 (pairs,) feature indices as written
    values: np.ndarray  # float64 (pairs,)
    in_order: bool  # every row lists increasing indices


def _iter_chunks(path: str) -> Iterator[tuple[bytes, int, int]]:
    """Line-aligned chunks of the file: (bytes, 0-based line the chunk starts at, newlines)."""
    line = 0
    with _open(path, "rb") as f:
        while True:
            buf = f.read(_CHUNK_BYTES)
            if not buf:
                return
            if line == 0:
                buf = _strip_bom(buf)
            if not buf.endswith(b"\n"):
                buf += f.readline()
            newlines = buf.count(b"\n")
            yield buf, line, newlines
            line += newlines


def _line_error(path: str, buf: bytes, offset: int, first_line: int, what: str) -> ValueError:
    """ValueError naming the file line that holds byte `offset` of `buf`, and its text."""
    start = buf.rfind(b"\n", 0, offset) + 1
    end = buf.find(b"\n", offset)
    text = buf[start:end if end >= 0 else len(buf)].decode("utf-8", "replace").strip()
    shown = text if len(text) <= 80 else text[:77] + "..."
    lineno = first_line + buf.count(b"\n", 0, offset) + 1
    return ValueError(f"{path}:{lineno}: {what}: {shown!r}")


def _parse_libsvm_chunk(path: str, buf: bytes, first_line: int, newlines: int) -> _Chunk:
    a = np.frombuffer(buf, dtype=np.uint8)
    rows = newlines + 1
    pairs = buf.count(b":")
    labels, val = np.empty(rows), np.empty(pairs)
    qid, nnz, lines = (np.empty(rows, np.int64) for _ in range(3))
    idx = np.empty(pairs, np.int64)
    slow = np.empty((rows + pairs, 4), np.int64)
    status, rows, pairs, n_slow, in_order, offset = _scan.scan_libsvm(
        a, labels, qid, nnz, lines, idx, val, slow)
    if status != _scan.OK:
        raise _line_error(path, buf, offset, first_line, _SCAN_ERRORS[status])
    for kind, target, start, end in slow[:n_slow].tolist():
        try:
            number = float(buf[start:end])
        except ValueError:
            what = "the label" if kind == _scan.SLOW_LABEL else "a feature value"
            raise _line_error(path, buf, start, first_line, f"{what} is not a number") from None
        (labels if kind == _scan.SLOW_LABEL else val)[target] = number
    return _Chunk(labels[:rows], qid[:rows], nnz[:rows], lines[:rows] + first_line,
                  idx[:pairs], val[:pairs], in_order)


def _sort_rows(path: str, nnz: np.ndarray, lines: np.ndarray, idx: np.ndarray,
               val: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices sorted within each row (files need not list them in order); a repeated index
    on a line is an error."""
    rows = np.repeat(np.arange(nnz.size), nnz)
    order = np.lexsort((idx, rows))
    rows, idx, val = rows[order], idx[order], val[order]
    dup = np.flatnonzero((rows[1:] == rows[:-1]) & (idx[1:] == idx[:-1]))
    if dup.size:
        r = rows[dup[0]]
        raise ValueError(f"{path}:{lines[r] + 1}: feature index {idx[dup[0]]} appears twice")
    return idx, val


def _groups_from_qid(path: str, qid: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """Sizes of the runs of equal qid; a query split over several runs is an error."""
    starts, split = qid_runs(qid)
    if split is not None:
        raise ValueError(f"{path}:{lines[split[1]] + 1}: rows of qid {qid[split[0]]:g} "
                         "are not contiguous; sort the file by qid")
    return np.diff(np.concatenate((starts, [qid.size]))).astype(np.int64)


def read_query_file(path: PathLike) -> np.ndarray:
    """int64 (G,) query sizes from a LightGBM query file (``data.query``): one positive
    integer a line, queries in the data file's row order; blank lines and ``#`` comments are
    skipped."""
    path = _check_path(path)
    sizes = []
    try:
        with _open(path, "rt", encoding="utf-8-sig") as f:
            for lineno, line in enumerate(f, 1):
                text = line.split("#", 1)[0].strip()
                if not text:
                    continue
                try:
                    size = int(text)
                except ValueError:
                    size = 0
                if size <= 0:
                    raise ValueError(f"{path}:{lineno}: a query file holds one positive "
                                     f"integer (a query's row count) a line, got {text!r}")
                sizes.append(size)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as e:
        raise ValueError(f"{path} is not a readable text file: {e}") from None
    if not sizes:
        raise ValueError(f"{path} holds no query sizes")
    return np.array(sizes, np.int64)


def read_libsvm(path: PathLike, *, n_features: int | None = None,
                zero_based: bool | str = "auto") -> FileData:
    """Read a libsvm / svmlight file (``label [qid:q] index:value ...``, ``#`` comments).

    Parameters
    ----------
    path : file name (``.gz`` is decompressed).
    n_features : number of columns of X (default: largest index + 1); needed when a file, e.g.
        a test set, does not use the last features.
    zero_based : True / False, or ``"auto"``: indices are 1-based when no index 0 occurs.

    Returns
    -------
    FileData with X a float64 scipy CSR matrix (n, F) (a `SparseMatrix` without scipy), y
    float64 (n,), group int64 query sizes when the lines carry ``qid``. Entries a line does not
    list are not stored: a `Dataset` reads them by its ``unstored`` rule (zero by default).
    """
    path = _check_path(path)
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    try:
        chunks = [_parse_libsvm_chunk(path, *chunk) for chunk in _iter_chunks(path)]
    except (gzip.BadGzipFile, EOFError) as e:
        raise ValueError(f"{path} is not a readable file: {e}") from None
    y = np.concatenate([c.labels for c in chunks]) if chunks else np.empty(0)
    if y.size == 0:
        raise ValueError(f"{path} contains no data rows")
    nnz, lines, qid, idx, val = (np.concatenate([getattr(c, name) for c in chunks])
                                 for name in ("nnz", "lines", "qid", "indices", "values"))
    if not all(c.in_order for c in chunks):
        idx, val = _sort_rows(path, nnz, lines, idx, val)
    group = None
    if qid.max() >= 0:
        if qid.min() < 0:
            raise ValueError(f"{path}:{lines[np.argmax(qid < 0)] + 1}: every line needs a qid "
                             "once any line has one")
        group = _groups_from_qid(path, qid, lines)

    if zero_based == "auto":
        zero_based = idx.size == 0 or idx.min() == 0
    if not zero_based:
        if idx.size and idx.min() < 1:
            raise ValueError(f"{path}: feature index 0 found in a 1-based file")
        idx = idx - 1
    needed = int(idx.max()) + 1 if idx.size else 0
    if n_features is None:
        n_features = max(needed, 1)
    elif needed > n_features:
        raise ValueError(f"{path} uses feature index {needed - 1} (0-based) but n_features is "
                         f"{n_features}")
    indptr = np.concatenate(([0], np.cumsum(nnz)))
    index_dtype = np.int32 if max(n_features, indptr[-1]) < 2**31 else np.int64
    try:
        import scipy.sparse as sp
    except ImportError:
        check_width(n_features)
        X = SparseMatrix(indptr.astype(np.int64), idx.astype(np.int32), val,
                         (y.size, n_features))
    else:
        X = sp.csr_matrix((val, idx.astype(index_dtype), indptr.astype(index_dtype)),
                          shape=(y.size, n_features))
    return FileData(X, y, group, None, None)


__all__ = ["FileData", "NA_STRINGS", "detect_format", "load_data", "read_csv", "read_libsvm",
           "read_query_file"]
