"""Numba scanners over the bytes of text files.

`scan_libsvm` parses libsvm lines in one pass. Numbers are converted with Clinger's fast path
(an integer mantissa below 2**53 times or over an exact power of ten up to 1e22 is correctly
rounded); the rest (more digits, large exponents, ``nan`` / ``inf``) are recorded as "slow"
tokens that the caller converts with Python's float(), so every value equals what float()
would give. `na_suspect_lines` finds the lines of delimited text that may hold empty fields or
NA spellings.
"""

from __future__ import annotations

import numba as nb
import numpy as np

# status codes of `scan_libsvm`
OK, BAD_LABEL, BAD_PAIR, BAD_INDEX, BAD_VALUE, BAD_QID = 0, 1, 2, 3, 4, 5
# kinds of slow tokens
SLOW_LABEL, SLOW_VALUE = 0, 1

_POW10 = np.array([10.0 ** i for i in range(23)])
_NL, _CR, _SP, _TAB, _HASH, _COLON = 10, 13, 32, 9, 35, 58


@nb.njit(cache=True, nogil=True, inline="always")
def _is_blank(c):
    return c == _SP or c == _TAB or c == _CR or c == 11 or c == 12


@nb.njit(cache=True, nogil=True)
def _parse_float(a, s, e):
    """(value, status) of bytes a[s:e]: status 0 parsed, 1 needs float(), 2 not a number."""
    i = s
    neg = False
    if i < e and (a[i] == 43 or a[i] == 45):  # '+' / '-'
        neg = a[i] == 45
        i += 1
    if i < e and not (48 <= a[i] <= 57 or a[i] == 46):
        return 0.0, 1  # nan / inf / infinity: let float() decide
    m = np.int64(0)
    digits = 0
    seen = 0
    exp10 = 0
    while i < e and 48 <= a[i] <= 57:
        seen += 1
        if digits < 18:
            m = m * 10 + (a[i] - 48)
            if m > 0:
                digits += 1
        else:
            exp10 += 1
            digits += 1
        i += 1
    if i < e and a[i] == 46:  # '.'
        i += 1
        while i < e and 48 <= a[i] <= 57:
            seen += 1
            if digits < 18:
                m = m * 10 + (a[i] - 48)
                exp10 -= 1
                if m > 0:
                    digits += 1
            else:
                digits += 1
            i += 1
    if seen == 0:
        return 0.0, 2
    if i < e and (a[i] == 101 or a[i] == 69):  # 'e' / 'E'
        i += 1
        eneg = False
        if i < e and (a[i] == 43 or a[i] == 45):
            eneg = a[i] == 45
            i += 1
        if i == e:
            return 0.0, 2
        x = 0
        while i < e and 48 <= a[i] <= 57:
            if x < 100000:
                x = x * 10 + (a[i] - 48)
            i += 1
        exp10 += -x if eneg else x
    if i != e:
        return 0.0, 2
    if digits > 18:
        return 0.0, 1  # mantissa was truncated
    if m == 0:
        return -0.0 if neg else 0.0, 0
    if m > 9007199254740992 or exp10 > 22 or exp10 < -22:
        return 0.0, 1
    v = m * _POW10[exp10] if exp10 >= 0 else m / _POW10[-exp10]
    return -v if neg else v, 0


@nb.njit(cache=True, nogil=True)
def _parse_uint(a, s, e):
    """Non-negative decimal integer of a[s:e], or -1."""
    if s == e or e - s > 18:
        return -1
    v = 0
    for i in range(s, e):
        if not 48 <= a[i] <= 57:
            return -1
        v = v * 10 + (a[i] - 48)
    return v


@nb.njit(cache=True, nogil=True)
def scan_libsvm(a, labels, qid, nnz, row_line, idx, val, slow):
    """Parse the libsvm lines in uint8 bytes `a`.

    Fills, per row: labels (float64), qid (int64, -1 when absent), nnz (pairs on the row),
    row_line (0-based line in the chunk); per pair: idx (int64 as written), val (float64); and
    slow (m, 4) int64 rows (kind, target, start, end) of tokens to convert with float().
    Capacities: rows >= lines in `a`, pairs >= colons in `a`, slow >= rows + pairs.
    Returns (status, n_rows, n_pairs, n_slow, sorted, byte offset of the bad token), where
    sorted says whether every row lists its indices in increasing order.
    """
    n = a.shape[0]
    i = 0
    line = 0
    row = 0
    p = 0
    ns = 0
    in_order = True
    while i < n:
        while i < n and _is_blank(a[i]):
            i += 1
        if i >= n:
            break
        if a[i] == _NL:
            line += 1
            i += 1
            continue
        if a[i] == _HASH:
            while i < n and a[i] != _NL:
                i += 1
            continue
        # the label
        s = i
        while i < n and not _is_blank(a[i]) and a[i] != _NL and a[i] != _HASH:
            i += 1
        v, st = _parse_float(a, s, i)
        if st == 2:
            return BAD_LABEL, row, p, ns, in_order, s
        if st == 1:
            slow[ns, 0] = SLOW_LABEL
            slow[ns, 1] = row
            slow[ns, 2] = s
            slow[ns, 3] = i
            ns += 1
        labels[row] = v
        qid[row] = -1
        start_p = p
        # index:value pairs up to the end of the line or a comment
        while True:
            while i < n and _is_blank(a[i]):
                i += 1
            if i >= n or a[i] == _NL or a[i] == _HASH:
                break
            s = i
            c = -1
            while i < n and not _is_blank(a[i]) and a[i] != _NL and a[i] != _HASH:
                if a[i] == _COLON:
                    if c >= 0:
                        return BAD_PAIR, row, p, ns, in_order, s
                    c = i
                i += 1
            if c < 0 or c == s or c == i - 1:
                return BAD_PAIR, row, p, ns, in_order, s
            if c - s == 3 and a[s] == 113 and a[s + 1] == 105 and a[s + 2] == 100:  # qid
                q = _parse_uint(a, c + 1, i)
                if q < 0 or qid[row] >= 0:
                    return BAD_QID, row, p, ns, in_order, s
                qid[row] = q
                continue
            k = _parse_uint(a, s, c)
            if k < 0:
                return BAD_INDEX, row, p, ns, in_order, s
            v, st = _parse_float(a, c + 1, i)
            if st == 2:
                return BAD_VALUE, row, p, ns, in_order, s
            if st == 1:
                slow[ns, 0] = SLOW_VALUE
                slow[ns, 1] = p
                slow[ns, 2] = c + 1
                slow[ns, 3] = i
                ns += 1
            if p > start_p and k <= idx[p - 1]:
                in_order = False
            idx[p] = k
            val[p] = v
            p += 1
        nnz[row] = p - start_p
        row_line[row] = line
        row += 1
    return OK, row, p, ns, in_order, 0


@nb.njit(cache=True, nogil=True)
def na_suspect_lines(a, delim, starts, ends):
    """Byte ranges [starts[k], ends[k]) of the lines of `a` that hold an empty field (a
    delimiter at the start or end of a line or next to another) or a letter other than the
    e / E of exponents, or '?', and of the lines made of blanks alone (spaces, tabs other than
    the delimiter, CR, VT, FF): numpy would read those as a row of one field. Capacity: lines
    in `a`. Returns how many were found."""
    n = a.shape[0]
    k = 0
    line_start = 0
    suspect = False
    blank = True
    prev = _NL
    for i in range(n):
        c = a[i]
        if c == _NL:
            if suspect or (blank and i > line_start):
                starts[k] = line_start
                ends[k] = i
                k += 1
            line_start = i + 1
            suspect = False
            blank = True
        elif not suspect:
            if c == delim or not _is_blank(c):
                blank = False
            lc = c | 32  # ASCII letters to lower case
            if (97 <= lc <= 122 and lc != 101) or c == 63:
                suspect = True
            elif c == delim and (prev == _NL or i + 1 == n or a[i + 1] == delim
                                 or a[i + 1] == _NL or a[i + 1] == _CR):
                suspect = True
        prev = c
    if suspect or (blank and n > line_start):
        starts[k] = line_start
        ends[k] = n
        k += 1
    return k
