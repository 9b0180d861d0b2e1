"""Numbers as text, one way everywhere: files, explanations and figures write a number, or an index, with these."""

from __future__ import annotations

import math
import struct


def short_float32(v: float) -> float:
    """The shortest decimal that reads back as the same float32: 1.8 in float32 is 1.7999999523…; this gives 1.8."""
    for digits in (6, 7, 8):
        s = float(f"{v:.{digits}g}")
        if struct.pack("<f", s) == struct.pack("<f", v):
            return s
    return float(f"{v:.9g}")


def shortest(v: float, float32: bool) -> float:
    """A recorded number as short as reads back to the same value: float32's shortest, or float64's own repr."""
    return short_float32(v) if float32 and math.isfinite(v) else v


def written(v: float) -> str:
    """A Python float as written by hand: 2.0 → '2', -0.5 → '−0.5', 6e-06 → '6e−6', -inf → '−∞'."""
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if math.isnan(v):
        return "NaN"
    if v == 0:
        return "0"  # -0.0 too: a zero weight times a negative value
    mantissa, _, exponent = repr(v).partition("e")
    mantissa = mantissa.removesuffix(".0")
    return (mantissa + (f"e{int(exponent)}" if exponent else "")).replace("-", "−")


def approx(v: float) -> str:
    """An intermediate computed in float64, to 7 significant digits, written by hand."""
    return written(float(f"{v:.7g}")) if math.isfinite(v) else written(v)


def brief(v: float) -> str:
    """A computed number where float rounding is not the point (a gradient), to 4 significant digits, written by
    hand: 7.7999997 → '7.8'."""
    return written(float(f"{v:.4g}")) if math.isfinite(v) else written(v)


def digits(s: str) -> int:
    """Significant digits of a number as written() writes it."""
    return len(s.partition("e")[0].lstrip("−").replace(".", "").strip("0")) or 1


def cell(v: float) -> str:
    """A value as a heatmap cell prints it (4 significant digits), so a screen reader says a short number."""
    return f"{v:.4g}"


SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def sub(*zero_based: int, sep: str = ",") -> str:
    """Indices from 0 as a reader counts them, from 1, in Unicode subscripts: sub(1, 0) is '₂,₁', sub(-1) is '₀'."""
    return sep.join(str(i + 1) for i in zero_based).translate(SUBSCRIPTS)


def size_text(nbytes: int) -> str:
    """Bytes as a person reads them: 108 B, 69.3 KiB, 12 MiB, 1.5 GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes} B"
