"""Grading machinery: call a learner's function on fixed and seeded random cases, compare with
the reference, print one clear line, return a bool.

A notebook's check cell looks like ``check_softmax(my_softmax)``; each exercise module builds
its cases and calls :func:`check`. A stub that raises ``NotImplementedError`` reads as "not
attempted yet", never as a failure, so "Run All" on the student edition reaches the end.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["Case", "check", "compare", "check_choices", "random_logit_cases"]

PASS, FAIL, TODO = "✓ pass", "✗ fail", "… not attempted yet"


@dataclass
class Case:
    """One input: positional ``args``, optional ``kwargs`` and a short ``label`` for messages."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    label: str = ""

    def describe(self) -> str:
        if self.label:
            return self.label
        parts = [_short(a) for a in self.args] + [f"{k}={_short(v)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


def _short(x, limit: int = 70) -> str:
    if isinstance(x, torch.Tensor):
        text = (
            f"tensor{tuple(x.shape)} {x.flatten()[:6].tolist()}" if x.numel() > 6 else f"tensor({x.tolist()})"
        )
    elif isinstance(x, np.ndarray):
        text = f"array({(np.round(x, 4) if x.dtype.kind == 'f' else x).tolist()})"
    elif isinstance(x, float):
        text = f"{x:.4g}"
    else:
        text = repr(x)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_array(x):
    if isinstance(x, torch.Tensor):
        return (
            x.detach().cpu().to(torch.float64).numpy() if x.is_floating_point() else x.detach().cpu().numpy()
        )
    return np.asarray(x)


def compare(expected, got, *, atol: float = 1e-6, rtol: float = 1e-5) -> str | None:
    """None when ``got`` matches ``expected`` (numbers, arrays, tensors, tuples, dicts), else why not."""
    if isinstance(expected, (tuple, list)) and not _is_numeric_seq(expected):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected {len(expected)} results, got {_short(got)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            why = compare(e, g, atol=atol, rtol=rtol)
            if why:
                return f"result {i}: {why}"
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return f"expected a dict with keys {sorted(expected)}, got {_short(got)}"
        for k in expected:
            why = compare(expected[k], got[k], atol=atol, rtol=rtol)
            if why:
                return f"[{k!r}]: {why}"
        return None
    if isinstance(expected, str) or expected is None:
        return None if got == expected else f"expected {expected!r}, got {_short(got)}"
    try:
        e, g = _as_array(expected), _as_array(got)
    except Exception:  # noqa: BLE001 - anything unconvertible is simply a mismatch
        return f"expected {_short(expected)}, got {_short(got)}"
    if g.dtype == object:
        return f"expected numbers like {_short(expected)}, got {_short(got)}"
    if e.shape != g.shape:
        return f"expected shape {e.shape}, got shape {g.shape}"
    why = _kind_mismatch(expected, e, got, g)
    if why:
        return why
    if e.dtype == bool or g.dtype == bool:
        return None if np.array_equal(e, g) else f"expected {_short(expected)}, got {_short(got)}"
    if not np.all(np.isfinite(g.astype(np.float64))) and np.all(np.isfinite(e.astype(np.float64))):
        return f"got non-finite values (nan/inf): {_short(got)}"
    if not np.allclose(g.astype(np.float64), e.astype(np.float64), atol=atol, rtol=rtol):
        return f"expected {_short(expected)}, got {_short(got)}"
    return None


_KINDS = {"b": "bool", "i": "integer", "u": "integer", "f": "floating-point", "c": "complex"}
_WHY_KIND = {
    "bool": "a mask must be bool: a float 0/1 mask is *added* to attention scores, not used to select",
    "integer": "ids and labels must be integers (int64): cross_entropy and embeddings need integer indices",
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
    return f"expected a {want} result, got dtype {dtype}" + (
        f" ({_WHY_KIND[want]})" if want in _WHY_KIND else ""
    )


def _is_numeric_seq(x) -> bool:
    return all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in x)


def check(
    name: str,
    fn: Callable,
    reference: Callable,
    cases: Iterable,
    *,
    hint: str = "",
    atol: float = 1e-6,
    rtol: float = 1e-5,
    no_mutation: bool = True,
    quiet: bool = False,
) -> bool:
    """Grade ``fn`` against ``reference`` on ``cases`` (``Case`` objects or tuples of args).

    Prints one line (pass; or the first case that differed, what differed, and ``hint``; or
    "not attempted yet") and returns True only if every case matches. With ``no_mutation``, a
    function that modifies its inputs fails too.
    """
    cases = [
        c if isinstance(c, Case) else Case(tuple(c) if isinstance(c, (tuple, list)) else (c,)) for c in cases
    ]
    say = (lambda msg: None) if quiet else print
    hint_text = f" Hint: {hint}" if hint else ""
    for case in cases:
        expected = reference(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
        args, kwargs = copy.deepcopy(case.args), copy.deepcopy(case.kwargs)
        try:
            got = fn(*args, **kwargs)
        except NotImplementedError:
            say(f"{TODO} {name}: replace the `raise NotImplementedError` with your code, then re-run.")
            return False
        except Exception as exc:  # noqa: BLE001 - report any learner error as a failure
            say(
                f"{FAIL} {name}: on input {case.describe()} your function raised "
                f"{type(exc).__name__}: {exc}.{hint_text}"
            )
            return False
        why = compare(expected, got, atol=atol, rtol=rtol)
        if why is None and no_mutation:
            if compare(case.args, args, atol=0, rtol=0) or compare(case.kwargs, kwargs, atol=0, rtol=0):
                why = "your function modified its input in place (work on a copy: x.clone())"
        if why:
            say(f"{FAIL} {name}: on input {case.describe()}: {why}.{hint_text}")
            return False
    say(f"{PASS} {name}: matches the reference on all {len(cases)} cases.")
    return True


def check_choices(
    name: str, answers_fn: Callable[[], dict], expected: dict[Any, Any], hints: dict[Any, str] | None = None
) -> bool:
    """Grade a dict of named answers (e.g. which bug each mystery pipeline has)."""
    try:
        answers = answers_fn()
    except NotImplementedError:
        print(f"{TODO} {name}: fill in your answers, then re-run.")
        return False
    if not isinstance(answers, dict):
        print(f"{FAIL} {name}: expected a dict of answers, got {type(answers).__name__}.")
        return False
    wrong = [k for k in expected if answers.get(k) != expected[k]]
    if wrong:
        k = wrong[0]
        hint = (hints or {}).get(k, "")
        print(
            f"{FAIL} {name}: {len(expected) - len(wrong)}/{len(expected)} right; {k!r} is not "
            f"{answers.get(k)!r}.{' Hint: ' + hint if hint else ''}"
        )
        return False
    print(f"{PASS} {name}: all {len(expected)} answers right.")
    return True


def random_logit_cases(seed: int) -> list[Case]:
    """Seeded random (z, y) cases for one position: V in [2, 8), logits of scale 1, 5 and 300
    (three cases each), z a float64 array and y an int target in [0, V)."""
    rng, cases = np.random.default_rng(seed), []
    for scale in (1.0, 5.0, 300.0):
        for _ in range(3):
            V = int(rng.integers(2, 8))
            cases.append(Case((rng.normal(0.0, scale, size=V), int(rng.integers(V)))))
    return cases


# Under nbgrader's autograder (it sets NBGRADER_EXECUTION) a check that does not pass raises
# AssertionError, so its test cell loses its points; elsewhere both are unchanged.
from .autograding import when_grading as _when_grading  # noqa: E402

check, check_choices = _when_grading(check), _when_grading(check_choices)
