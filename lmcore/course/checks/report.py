"""What a check says when a result differs: words and a few numbers a person reads.

:func:`compare` returns None when a result matches the reference, else one short sentence: the
first differing position with both values there (with only yours for ids, labels and masks,
where the expected value is the answer), the largest |Δ| against the tolerance and, when
the result is the expected one times a constant, that ratio ("0.25x the expected"). It never
prints a tensor of thousands of entries; :func:`short` describes any input in a few characters.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

__all__ = ["compare", "short", "ratio_of", "apart", "kind_differs"]


def _num(x: float) -> str:
    return f"{x + 0.0:.4g}"  # + 0.0: -0.0 reads as 0


def _apart(e: float, g: float) -> tuple[str, str]:
    """``e`` and ``g`` with 4 significant digits, or as many more as it takes for the two to read
    differently (a failure line never shows two equal-looking numbers)."""
    e, g = e + 0.0, g + 0.0  # -0.0 reads as 0
    for digits in range(4, 18):
        a, b = f"{e:.{digits}g}", f"{g:.{digits}g}"
        if a != b:
            return a, b
    return repr(e), repr(g)


apart = _apart  # for the checkers' own lines


def short(x, limit: int = 70) -> str:
    """A few characters for ``x``: small arrays and tensors as rounded lists, large ones as
    their shape and dtype with the first entries."""
    if isinstance(x, (torch.Tensor, np.ndarray)):
        name = "tensor" if isinstance(x, torch.Tensor) else "array"
        a = _as_array(x)
        if a.dtype.kind == "f":
            a = np.vectorize(lambda v: float(_num(v)))(a) if a.size else a
        flat = a.ravel().tolist()
        if a.size <= 8:
            text = f"{name}({a.tolist()})"
        else:
            text = (
                f"{name} of shape {tuple(a.shape)} {str(x.dtype).replace('torch.', '')}, starting {flat[:4]}"
            )
    elif isinstance(x, float):
        text = _num(x)
    else:
        text = repr(x)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_array(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return x.to(torch.float64).numpy() if x.is_floating_point() else x.numpy()
    if isinstance(x, numbers.Rational) and not isinstance(x, (int, np.integer)):
        return np.asarray(float(x))  # an exact answer (fractions.Fraction) is a number too
    return np.asarray(x)


def ratio_of(expected: np.ndarray, got: np.ndarray) -> float | None:
    """The constant c with got = c * expected on every entry (to 1e-6), if there is one and c != 1."""
    e, g = expected.astype(np.float64).ravel(), got.astype(np.float64).ravel()
    scale = np.abs(e).max(initial=0.0)
    if scale == 0 or not np.all(np.isfinite(g)):
        return None
    big = np.abs(e) > 1e-9 * scale
    if not np.allclose(g[~big], 0.0, atol=1e-9 * scale):
        return None
    r = g[big] / e[big]
    c = float(np.median(r))
    if not np.all(np.abs(r - c) <= 1e-6 * max(1.0, abs(c))) or abs(c - 1.0) <= 1e-6:
        return None
    return c


def _simple(c: float) -> bool:
    """A ratio worth naming for a single number: ±k or ±1/k (k <= 16), ln 2 or 1/ln 2."""
    a = abs(c)
    candidates = [float(k) for k in range(1, 17)] + [1 / k for k in range(2, 17)] + [np.log(2), 1 / np.log(2)]
    return any(abs(a - v) <= 1e-6 * v for v in candidates)


def _where(index: tuple) -> str:
    return "" if not index else f" at [{', '.join(str(int(i)) for i in index)}]"


def _numbers(expected, got, e, g, atol: float, rtol: float) -> str | None:
    e64, g64 = e.astype(np.float64), g.astype(np.float64)
    bad = ~np.isfinite(g64) & np.isfinite(e64)
    if bad.any():
        i = tuple(np.argwhere(bad)[0]) if g64.ndim else ()
        return (
            f"your result is {g64[i] if g64.ndim else float(g64)}{_where(i)} where the expected value "
            f"is {_num(float(e64[i] if e64.ndim else e64))}"
            + (f" ({int(bad.sum())} of {bad.size} entries non-finite)" if bad.size > 1 else "")
        )
    off = ~np.isclose(g64, e64, atol=atol, rtol=rtol, equal_nan=True)
    if not off.any():
        return None
    delta = np.where(np.isfinite(g64 - e64), np.abs(g64 - e64), np.inf)
    tol = f"allowed {atol:.2g} + {rtol:.2g}·|expected|"
    if e64.ndim == 0:
        c = ratio_of(e64, g64)
        times = f"; that is {c:.4g}x the expected" if c is not None and _simple(c) else ""
        a, b = _apart(float(e64), float(g64))
        return f"expected {a}, got {b} (|Δ| = {float(delta):.2g}, {tol}){times}"
    i = tuple(np.argwhere(off)[0])
    if e.dtype.kind in "biu" and g.dtype.kind in "biu":  # ids, labels, masks: no tolerance to speak of
        # the expected id or mask value there is the answer at that position: the line says where
        # and what yours is, and the checker's question asks about it (the hint tells later)
        shown = (lambda v: str(bool(v))) if e.dtype.kind == "b" else (lambda v: str(int(v)))
        text = f"first difference{_where(i)}: yours is {shown(g64[i])} there; "
        return text + f"{int(off.sum())} of {off.size} entries differ"
    a, b = _apart(float(e64[i]), float(g64[i]))
    j = tuple(np.unravel_index(int(np.argmax(np.where(off, delta, -1.0))), delta.shape))
    largest = f"{float(delta[j]):.2g}" + (
        _where(j) if j != i else ""
    )  # where the error is, when it is elsewhere
    text = (
        f"first difference{_where(i)}: expected {a}, got {b}; "
        f"{int(off.sum())} of {off.size} entries differ, max |Δ| = {largest} ({tol})"
    )
    c = ratio_of(e64, g64)
    return text + (f"; your result is {_apart(c, 1.0)[0]}x the expected everywhere" if c is not None else "")


_KINDS = {"b": "bool", "i": "integer", "u": "integer", "f": "floating-point", "c": "complex"}
_WHY_KIND = {
    "bool": "a mask must be bool: a float 0/1 mask is *added* to attention scores, not used to select",
    "integer": "ids and labels must be integers (int64 or int32): cross_entropy and embeddings need integer indices",
}


def _kind_mismatch(expected, e, got, g) -> str | None:
    """Where the reference returns a tensor or array, its dtype's kind (bool, integer, float)
    carries meaning: float labels or a float 0/1 mask are a different thing. Widths may differ."""
    if not isinstance(expected, (torch.Tensor, np.ndarray)):
        return None
    want, have = _KINDS.get(e.dtype.kind), _KINDS.get(g.dtype.kind)
    if want == have or want is None:
        return None
    dtype = got.dtype if isinstance(got, (torch.Tensor, np.ndarray)) else type(got).__name__
    article = "an" if want[0] in "aeiou" else "a"
    return f"expected {article} {want} result, got dtype {dtype}" + (
        f" ({_WHY_KIND[want]})" if want in _WHY_KIND else ""
    )


def kind_differs(expected, got) -> bool:
    """True when ``got`` is an array or tensor of another kind (bool, integer, float) than the
    tensor or array ``expected``: the mismatch :func:`compare` reports before any value."""
    try:
        return _kind_mismatch(expected, _as_array(expected), got, _as_array(got)) is not None
    except Exception:  # noqa: BLE001 - a result that is no array is not a kind mismatch
        return False


def _is_numeric_seq(x) -> bool:
    return all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in x)


def compare(expected, got, *, atol: float = 1e-6, rtol: float = 1e-5) -> str | None:
    """None when ``got`` matches ``expected`` (numbers, arrays, tensors, tuples, dicts), else why not."""
    if isinstance(expected, (tuple, list)) and not _is_numeric_seq(expected):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected {len(expected)} results, got {short(got)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            why = compare(e, g, atol=atol, rtol=rtol)
            if why:  # nested results read as one path: "result [1][0][0]: ..."
                inner = why.removeprefix("result ") if why.startswith("result [") else f": {why}"
                return f"result [{i}]{inner}"
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return f"expected a dict with keys {sorted(expected)}, got {short(got)}"
        for k in expected:
            why = compare(expected[k], got[k], atol=atol, rtol=rtol)
            if why:
                return f"[{k!r}]: {why}"
        return None
    if isinstance(expected, str) or expected is None:
        return None if got == expected else f"expected {expected!r}, got {short(got)}"
    try:
        e, g = _as_array(expected), _as_array(got)
    except Exception:  # noqa: BLE001 - anything unconvertible is simply a mismatch
        return f"expected {short(expected)}, got {short(got)}"
    if g.dtype.kind in "OUS" and e.dtype.kind not in "OUS":  # objects, or text such as "0.693147"
        return f"expected numbers like {short(expected)}, got {short(got)}"
    if e.shape != g.shape:
        return f"expected shape {e.shape}, got shape {g.shape}"
    why = _kind_mismatch(expected, e, got, g)
    if why:
        return why
    if e.dtype == bool or g.dtype == bool:
        if np.array_equal(e, g):
            return None
        if e.ndim == 0:
            return f"expected {bool(e)}, got {bool(g)}"
        i = tuple(np.argwhere(e != g)[0])
        return f"first difference{_where(i)}: expected {bool(e[i])}, got {bool(g[i])}; {int((e != g).sum())} of {e.size} differ"
    return _numbers(expected, got, e, g, atol, rtol)
