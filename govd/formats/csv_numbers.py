"""Compiled parsing and formatting of purely numeric CSV bodies (the rows of a sweep table).

A one-hour sweep at 9 levels is about two million rows; Python's per-cell float parsing and
formatting would take tens of seconds on a small machine, `np.loadtxt` and `astype(str)` a few
seconds each. These two numba kernels do one pass over the bytes. They only locate a bad row;
the caller explains it from the line's text (the error path is rare and may be slow).

Numbers are plain decimals with an optional exponent (`-1.5`, `2e-3`, `17`); `nan`, `inf` and
hexadecimal are not accepted. Parsing is correctly rounded for up to 15 significant digits with
exponents within ±22 (the Clinger fast path); beyond that it is within a few ulp.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from govd.kernels.loader import njit

PARSE_OK = 0
PARSE_BAD_NUMBER = 1
PARSE_TOO_FEW_CELLS = 2
PARSE_TOO_MANY_CELLS = 3
PARSE_BLANK_LINE = 4

_NEWLINE = 10
_CR = 13
_COMMA = 44


@njit(cache=True)
def count_rows(buf: npt.NDArray[np.uint8]) -> int:
    """Lines in `buf`: a last line without a newline counts, a final newline adds none."""
    rows = 0
    for b in buf:
        if b == _NEWLINE:
            rows += 1
    if buf.size > 0 and buf[buf.size - 1] != _NEWLINE:
        rows += 1
    return rows


@njit(cache=True)
def _pow10(exponent: int) -> float:
    result = 1.0
    base = 10.0
    e = abs(exponent)
    while e > 0:
        if e & 1:
            result *= base
        base *= base
        e >>= 1
    return result


@njit(cache=True)
def parse_rows(
    buf: npt.NDArray[np.uint8], ncols: int
) -> tuple[npt.NDArray[np.float64], int, int]:
    """Parse `buf` into a [rows, ncols] float64 array.

    Returns (values, status, row): status is PARSE_OK, or one of the PARSE_* codes with `row` the
    0-based line of `buf` where parsing stopped.
    """
    rows = count_rows(buf)
    out = np.empty((rows, ncols), dtype=np.float64)
    n = buf.size
    i = 0
    for row in range(rows):
        for col in range(ncols):
            while i < n and (buf[i] == 32 or buf[i] == 9):
                i += 1
            if col == 0 and (i >= n or buf[i] == _NEWLINE or buf[i] == _CR):
                return out, PARSE_BLANK_LINE, row
            negative = False
            if i < n and (buf[i] == 45 or buf[i] == 43):  # '-' or '+'
                negative = buf[i] == 45
                i += 1
            mantissa = 0
            exponent = 0
            digits = 0
            while i < n and 48 <= buf[i] <= 57:
                if mantissa < 100_000_000_000_000_000:
                    mantissa = mantissa * 10 + (buf[i] - 48)
                else:
                    exponent += 1
                digits += 1
                i += 1
            if i < n and buf[i] == 46:  # '.'
                i += 1
                while i < n and 48 <= buf[i] <= 57:
                    if mantissa < 100_000_000_000_000_000:
                        mantissa = mantissa * 10 + (buf[i] - 48)
                        exponent -= 1
                    digits += 1
                    i += 1
            if digits == 0:
                return out, PARSE_BAD_NUMBER, row
            if i < n and (buf[i] == 101 or buf[i] == 69):  # 'e' or 'E'
                i += 1
                exp_negative = False
                if i < n and (buf[i] == 45 or buf[i] == 43):
                    exp_negative = buf[i] == 45
                    i += 1
                exp_digits = 0
                written = 0
                while i < n and 48 <= buf[i] <= 57:
                    if written < 10_000:
                        written = written * 10 + (buf[i] - 48)
                    exp_digits += 1
                    i += 1
                if exp_digits == 0:
                    return out, PARSE_BAD_NUMBER, row
                exponent += -written if exp_negative else written
            value = float(mantissa)
            if exponent >= 0:
                value *= _pow10(exponent)
            else:
                value /= _pow10(-exponent)
            out[row, col] = -value if negative else value
            while i < n and (buf[i] == 32 or buf[i] == 9 or buf[i] == _CR):
                i += 1
            at_end = i >= n or buf[i] == _NEWLINE
            if col < ncols - 1:
                if at_end:
                    return out, PARSE_TOO_FEW_CELLS, row
                if buf[i] != _COMMA:
                    return out, PARSE_BAD_NUMBER, row
                i += 1
            elif not at_end:
                if buf[i] == _COMMA:
                    return out, PARSE_TOO_MANY_CELLS, row
                return out, PARSE_BAD_NUMBER, row
        i += 1  # past the newline
    return out, PARSE_OK, 0


@njit(cache=True)
def _write_digits(out: npt.NDArray[np.uint8], pos: int, value: int) -> int:
    ndigits = 1
    rest = value // 10
    while rest > 0:
        ndigits += 1
        rest //= 10
    end = pos + ndigits
    for k in range(end - 1, pos - 1, -1):
        out[k] = 48 + value % 10
        value //= 10
    return end


@njit(cache=True)
def _shift_right(out: npt.NDArray[np.uint8], start: int, end: int, by: int) -> None:
    for k in range(end - 1, start - 1, -1):
        out[k + by] = out[k]


@njit(cache=True)
def _insert_point(out: npt.NDArray[np.uint8], at: int, end: int) -> int:
    _shift_right(out, at, end, 1)
    out[at] = 46  # '.'
    return end + 1


@njit(cache=True)
def _write_number(out: npt.NDArray[np.uint8], pos: int, x: float, sig: int) -> int:
    if x == 0.0:
        out[pos] = 48
        return pos + 1
    if x < 0.0:
        out[pos] = 45
        pos += 1
        x = -x
    e10 = int(np.floor(np.log10(x)))
    shift = sig - 1 - e10
    scaled = x * _pow10(shift) if shift >= 0 else x / _pow10(-shift)
    mantissa = int(np.rint(scaled))
    if mantissa >= int(_pow10(sig)):  # rounding carried into one more digit
        mantissa = int(np.rint(scaled / 10.0))
        e10 += 1
    last = e10 - sig + 1  # power of ten of the mantissa's last digit
    while mantissa % 10 == 0 and mantissa > 0:
        mantissa //= 10
        last += 1
    start = pos
    pos = _write_digits(out, pos, mantissa)
    ndigits = pos - start
    if e10 >= 16 or e10 < -5:  # scientific: d.ddde±x
        if ndigits > 1:
            pos = _insert_point(out, start + 1, pos)
        out[pos] = 101
        pos += 1
        if e10 < 0:
            out[pos] = 45
            pos += 1
        return _write_digits(out, pos, abs(e10))
    if last >= 0:
        out[pos : pos + last] = 48
        return pos + last
    decimals = -last
    if ndigits > decimals:
        return _insert_point(out, pos - decimals, pos)
    # 0.000ddd: move the digits right behind "0." and the missing zeros
    pad = decimals - ndigits + 2
    _shift_right(out, start, pos, pad)
    out[start] = 48
    out[start + 1] = 46
    out[start + 2 : start + pad] = 48
    return pos + pad


@njit(cache=True)
def format_rows(
    values: npt.NDArray[np.float64], integer_cols: npt.NDArray[np.bool_], sig: int
) -> npt.NDArray[np.uint8]:
    """Format a [rows, ncols] array as CSV lines (ASCII bytes, each line ending in a newline).

    Columns flagged in `integer_cols` are written as integers (rounded); the others with at most
    `sig` significant digits (1..15), trailing zeros dropped. Values must be finite.
    """
    rows, ncols = values.shape
    out = np.empty(rows * ncols * (sig + 10), dtype=np.uint8)
    pos = 0
    for r in range(rows):
        for c in range(ncols):
            if c > 0:
                out[pos] = _COMMA
                pos += 1
            x = values[r, c]
            if integer_cols[c]:
                v = int(np.rint(x))
                if v < 0:
                    out[pos] = 45
                    pos += 1
                    v = -v
                pos = _write_digits(out, pos, v)
            else:
                pos = _write_number(out, pos, x, sig)
        out[pos] = _NEWLINE
        pos += 1
    return out[:pos]
