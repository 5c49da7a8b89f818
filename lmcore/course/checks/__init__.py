"""Grading machinery: call a learner's function on fixed and seeded random cases, compare with
the reference, print one clear line, return a :class:`CheckResult` (true when it passed).

A notebook's check cell looks like ``check_softmax(my_softmax)``; each exercise module builds
its cases and calls :func:`check`. A stub that raises ``NotImplementedError`` reads as "not
attempted yet", never as a failure, so "Run All" on the student edition reaches the end.

The learner's function runs with warnings captured (a warning is named in the line, never
written to stderr, and does not fail a right answer) and, with ``forbid=``, with calls to the
references it must not use recorded (:mod:`lmcore.course.checks.guard`). Failure lines say what
differs in numbers (:mod:`lmcore.course.checks.report`). The result is true or false for tests
and for the autograder, and shows nothing as a cell's last value, so the "✓ pass" line stands
alone.
"""

from __future__ import annotations

import copy
import functools
import inspect
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .guard import captured_warnings, recorded_calls, warning_text
from .report import _as_array, apart, compare, kind_differs, ratio_of, short

__all__ = [
    "Case",
    "CheckResult",
    "check",
    "compare",
    "check_choices",
    "random_logit_cases",
    "float32_atol",
    "answer_digest",
    "apart",
    "first_label_free",
    "same_layout",
    "run_learner",
    "LearnerRun",
    "say_line",
    "hint_for",
    "only_match",
    "near_mistake",
    "key_search_refused",
    "real_pair",
    "PASS",
    "FAIL",
    "TODO",
]

PASS, FAIL, TODO = "✓ pass", "✗ fail", "… not attempted yet"

# The tolerance policy. A right answer computed in float32, or summed in another order, passes
# wherever the quantity is well defined to float32 precision: the defaults of :func:`check`
# (rtol 1e-5, atol 1e-6) hold for values of moderate size; a value computed from inputs near
# 1000 (a log-sum-exp of large logits) is only known to a few float32 spacings of those inputs,
# :func:`float32_atol`. A checker tightens them only where a plausible wrong answer would
# otherwise pass, and then says so; an approximation is graded against its own error.
EPS32 = float(torch.finfo(torch.float32).eps)


def _raised_line(name: str, case, error: BaseException, hint: str) -> str:
    """The failure line of a case on which the learner's function raised: the error, then
    ``hint``, except after a check's own question (a message ending with "?"), which is the whole
    diagnosis."""
    message = str(error)[:200]
    more = "" if message.endswith("?") else hint
    if "view size is not compatible" in message:  # .view on a slice: the error names strides, not why
        more = (
            " Hint: .view relabels memory without copying it: is the tensor you call it on laid out "
            "row after row, or is it a slice that kept its parent's strides?"
        )
    return f"{FAIL} {name}: on input {case.describe()} your function raised {type(error).__name__}: {_sentence(message)}{more}"


def _sentence(text: str) -> str:
    """``text`` ended as a sentence: a full stop added unless it ends with one, a ? or a !."""
    return text if text.rstrip().endswith((".", "?", "!")) else f"{text}."


def near_mistake(value: float, mistake: float, expected: float, tol: float = 5e-4) -> bool:
    """Whether ``value`` is what a mistake gives: within ``tol`` of ``mistake``, and ten times
    nearer it than the mistake sits from ``expected``, so that a noisy estimate that lands near a
    mistake by chance (a Monte Carlo answer, say) is not told it made it."""
    return abs(value - mistake) < min(tol, abs(mistake - expected) / 10)


def only_match(named) -> str:
    """The one question in ``named`` (the mistakes a wrong answer matches), or ``""`` when none or
    several match: an explanation names a mistake only when it can tell which one was made."""
    named = set(named)
    return named.pop() if len(named) == 1 else ""


def real_pair(got) -> tuple[float, float] | None:
    """Two floats from any pair of real numbers (a tuple or list of Python, NumPy or 0-d tensor
    numbers, or a 1-D array or tensor of two), else None: for exercises that return two numbers."""
    if isinstance(got, torch.Tensor):
        got = got.detach().cpu()
    if isinstance(got, (torch.Tensor, np.ndarray)) and got.ndim == 1:
        got = got.tolist()
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    out = []
    for v in got:
        if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return None
        out.append(float(v))
    return out[0], out[1]


def float32_atol(*inputs, ulps: int = 8, floor: float = 1e-6) -> float:
    """An absolute tolerance for a value computed in float32 from ``inputs`` (tensors or
    arrays): ``ulps`` float32 spacings at their largest magnitude, and at least ``floor``."""
    big = max((float(np.abs(_as_array(x)).max(initial=0.0)) for x in inputs), default=0.0)
    return max(floor, ulps * EPS32 * big)


_short = short  # the name other modules of the course used


class CheckResult:
    """Whether a check passed (``bool(result)``, ``result == True``) and the line it printed.

    As the last value of a notebook cell it displays nothing: the printed line is the output.
    """

    __slots__ = ("passed", "line")

    def __init__(self, passed: bool, line: str = ""):
        self.passed, self.line = bool(passed), line

    def __bool__(self) -> bool:
        return self.passed

    def __eq__(self, other) -> bool:
        if isinstance(other, CheckResult):
            return self.passed == other.passed
        if isinstance(other, (bool, np.bool_)):
            return self.passed == bool(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.passed)

    def __repr__(self) -> str:
        return f"CheckResult({self.passed})"

    def _ipython_display_(self) -> None:
        """Nothing: the check already printed its one line."""


@dataclass
class Case:
    """One input: positional ``args``, optional ``kwargs`` and a short ``label`` for messages."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    label: str = ""

    def describe(self) -> str:
        if self.label:
            return self.label
        parts = [short(a) for a in self.args] + [f"{k}={short(v)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


def _copy_advice(args) -> str:
    torchy = any(isinstance(a, torch.Tensor) for a in args)
    return "work on a copy: x.clone()" if torchy else "work on a copy: x.copy()"


# The ratios that mean the same mistake in any exercise; a checker's ratio_hints may reword them.
_RATIO_DEFAULTS = {
    -1.0: "your result is the expected with its sign flipped: where does your sign come from?",
    float(1 / np.log(2)): "that is 1/ln 2 times the expected: which logarithm did you take?",
    float(np.log(2)): "that is ln 2 times the expected: which logarithm does the exercise ask for?",
    float(1 / np.log(10)): "that is 1/ln 10 times the expected: which logarithm did you take?",
}


def _ratio_note(expected, got, ratio_hints) -> str:
    """ " Did you ...?" when the result is the expected times a constant that ``ratio_hints`` (or
    :data:`_RATIO_DEFAULTS`: a flipped sign, the other logarithm) names."""
    pairs = [*(ratio_hints or {}).items(), *_RATIO_DEFAULTS.items()]  # the checker's own first
    try:
        e, g = _as_array(expected), _as_array(got)
        c = ratio_of(e, g) if e.shape == g.shape and e.dtype.kind == g.dtype.kind == "f" else None
    except Exception:  # noqa: BLE001 - a structure the ratio does not apply to
        c = None
    if c is None and isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list)):
        for e1, g1 in zip(expected, got):
            note = _ratio_note(e1, g1, ratio_hints)
            if note:
                return note
        return ""
    for value, text in pairs:
        if c is not None and abs(c - value) <= 1e-6 * max(1.0, abs(value)):
            return f" {text[:1].upper()}{text[1:]}"
    return ""


_FAILED: dict[str, int] = {}  # checker name -> failures so far in this kernel


def hint_for(name: str, hint, diagnosis: str = "", fn=None) -> str:
    """``hint`` as text. A pair (nudge, full) shows the nudge, never the full hint: that one, like
    the solution, comes only when the learner asks, from ``show_solution`` (from the second
    failure on, the line says how). A ``diagnosis`` (the property this answer broke, as a
    question) replaces the nudge, which was written for one mistake and may point away from this."""
    if not isinstance(hint, (tuple, list)):
        return f" Hint: {diagnosis or hint}" if (diagnosis or hint) else ""
    _FAILED[name] = _FAILED.get(name, 0) + 1
    text = f" Hint: {diagnosis or hint[0]}"
    if _FAILED[name] > 1:
        own = getattr(fn, "__name__", "")
        own = own if own in _exercise_names() else _exercise_of_caller()
        ask = (
            f'show_solution("{own}")'
            if own
            else "show_solution, given the name of the function this exercise asks for,"
        )
        text += f" Stuck? {ask} gives the fuller hint."
    return text


def _exercise_of_caller() -> str:
    """The exercise's function name, found from the course's ``check_*`` function running this
    check (for a learner's function under another name, or wrapped); "" where none is found."""
    checks = _exercises_by_check()
    for frame in inspect.stack(context=0)[1:]:
        if frame.function in checks:
            return checks[frame.function]
    return ""


@functools.lru_cache(maxsize=1)
def _exercises_by_check() -> dict[str, str]:
    try:
        from ..solutions import exercises_by_check

        return exercises_by_check()
    except Exception:  # noqa: BLE001 - no instructor edition here: name no exercise
        return {}


@functools.lru_cache(maxsize=1)
def _exercise_names() -> frozenset[str]:
    """The function names ``show_solution`` knows (read from the instructor edition once); empty
    where it cannot be read, so a failure line never names an exercise that does not exist."""
    try:
        from ..solutions import exercise_names

        return frozenset(exercise_names())
    except Exception:  # noqa: BLE001 - no instructor edition here: name no exercise
        return frozenset()


_KIND_ONLY = "the values may be right; the type is not: which dtype does the exercise ask for?"


def _diagnosis(explain, ratio_hints, fn, case, expected, got) -> str:
    """What this wrong answer did, as a question: the ratio note when the result is the expected
    times a constant ``ratio_hints`` names, else ``explain(fn, case, expected, got)``, the first
    property of the exercise it breaks on that input; for a result of the wrong kind (float labels,
    a float mask, text for a number) that the explanation does not cover, a question about the type,
    never the exercise's nudge about its values; ``""`` when none can tell."""
    if isinstance(got, (str, bytes)) and not isinstance(expected, (str, bytes)):
        return f"your function returns text, {got!r}: the check compares numbers. What does formatting a number do to it?"
    note = _ratio_note(expected, got, ratio_hints).strip()
    kind = _KIND_ONLY if kind_differs(expected, got) else ""
    half = _half_precision(got)
    if half and not note:
        return half
    if note or explain is None:
        return note or kind
    try:
        with captured_warnings():
            return explain(fn, case, expected, got) or kind
    except Exception:  # noqa: BLE001 - a diagnosis must never turn a failure into a crash
        return kind


_HALF_DIGITS = {"float16": "about 3", "bfloat16": "about 2"}


def _half_precision(got) -> str:
    """A question about precision when ``got`` holds float16 or bfloat16 values (a tensor, an
    array, or a tuple or list of them): at the course's tolerances their rounding alone fails, and
    a note about the exercise's maths would send the learner after a mistake they did not make."""
    items = got if isinstance(got, (tuple, list)) else (got,)
    for item in items:
        dtype = str(getattr(item, "dtype", "")).replace("torch.", "")
        if dtype in _HALF_DIGITS:
            return (
                f"your result is {dtype}, which keeps {_HALF_DIGITS[dtype]} significant digits: is the "
                "difference the check reports your maths, or that rounding? Which precision does the "
                "exercise compare against?"
            )
    return ""


def _forbidden(forbid) -> dict[str, str]:
    if not forbid:
        return {}
    if isinstance(forbid, str):
        forbid = [forbid]
    if isinstance(forbid, dict):
        return dict(forbid)
    return {name: "write it yourself" for name in forbid}


def _mutated(case, args, kwargs) -> str:
    """The failure text when the learner's function changed its inputs (``""`` when it did not)."""
    if compare(case.args, args, atol=0, rtol=0) or compare(case.kwargs, kwargs, atol=0, rtol=0):
        return f"your function modified its input in place ({_copy_advice(case.args)}); the result itself was right."
    return ""


def say_line(line: str, quiet: bool, passed: bool) -> CheckResult:
    if not quiet:
        print(line)
    return CheckResult(passed, line)


@dataclass
class LearnerRun:
    """What one call of a learner's function did: its ``value``; or ``todo`` (the stub's
    NotImplementedError); or the ``error`` it raised; ``called``, the first forbidden reference it
    called (``""`` if none); ``warned``, the warnings it gave, as text."""

    value: Any = None
    todo: bool = False
    error: Exception | None = None
    called: str = ""
    warned: str = ""


def run_learner(fn: Callable, args: tuple = (), kwargs: dict | None = None, forbidden=None) -> LearnerRun:
    """Call ``fn(*args, **kwargs)`` the way every checker of the kit does: its warnings captured,
    the calls it makes to ``forbidden`` (dotted names, or a dict name -> message) recorded, a stub
    or any error it raises caught and reported, never raised."""
    with captured_warnings() as caught, recorded_calls(_forbidden(forbidden)) as called:
        try:
            value, error = fn(*args, **(kwargs or {})), None
        except NotImplementedError:
            return LearnerRun(todo=True)
        except Exception as exc:  # noqa: BLE001 - report any learner error as a failure
            value, error = None, exc
    return LearnerRun(value, False, error, called[0] if called else "", warning_text(caught))


def _expected(reference: Callable, case: Case):
    """The reference's result on a copy of the case's arguments, its warnings kept out of view."""
    with captured_warnings():
        return reference(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))


def _judged(case: Case, expected, got, *, judge, atol, rtol) -> tuple[str | None, str | None]:
    """(what is wrong with ``got``, the question for it): ``judge``'s verdict against the goal,
    else the comparison with the reference's ``expected`` (no question: the nudge or ``explain``)."""
    if judge is not None:
        return judge(*case.args, got)
    tol = atol(*case.args, **case.kwargs) if callable(atol) else atol
    return compare(expected, got, atol=tol, rtol=rtol), None


def check(
    name: str,
    fn: Callable,
    reference: Callable | None,
    cases: Iterable,
    *,
    hint: str | tuple[str, str] = "",
    atol: float | Callable[..., float] = 1e-6,
    rtol: float = 1e-5,
    no_mutation: bool = True,
    quiet: bool = False,
    forbid: Iterable[str] | dict[str, str] | None = None,
    ratio_hints: dict[float, str] | None = None,
    explain: Callable[..., str] | None = None,
    judge: Callable[..., tuple[str, str]] | None = None,
    free: Callable[[tuple, Any, Any], Any] | None = None,
) -> CheckResult:
    """Grade ``fn`` against ``reference`` on ``cases`` (``Case`` objects or tuples of args).

    Prints one line (pass; or the first case that differed, what differed, and ``hint``; or
    "not attempted yet") and returns a result that is true only if every case matches. With
    ``no_mutation``, a function that modifies its inputs fails too. ``forbid`` names references
    (dotted names, or a dict name -> message) that ``fn`` must not call, directly or not;
    ``ratio_hints`` maps a constant ratio got/expected to a question ("did you divide by n twice?").
    ``hint`` may be a pair (nudge, full): a failure shows the nudge (from the second on, with a
    pointer to ``show_solution``, which alone gives the full hint); ``explain(fn, case, expected,
    got)``, the property a wrong result broke as a question about that input (or ``""``), stands
    in for the nudge. ``atol`` may be a function of a case's arguments (e.g. :func:`float32_atol`).
    Where several results are right, ``judge(*args, got) -> (what, question)`` grades against the
    exercise's goal instead (``what``: the failure, ``""`` if none; ``question``: for the nudge), and
    ``reference`` (pass None) is never called. ``free(args, expected, got)`` returns ``got`` with the
    reference's values where the learner may choose (a label the shift drops, what padding reads)."""
    cases = [
        c if isinstance(c, Case) else Case(tuple(c) if isinstance(c, (tuple, list)) else (c,)) for c in cases
    ]
    forbidden = _forbidden(forbid)
    warned = ""
    for case in cases:
        expected = None if judge else _expected(reference, case)
        args, kwargs = copy.deepcopy(case.args), copy.deepcopy(case.kwargs)
        run = run_learner(fn, args, kwargs, forbidden)
        got, said = run.value, run.warned
        if run.todo:
            return say_line(
                f"{TODO} {name}: replace the `raise NotImplementedError` with your code, then re-run.",
                quiet,
                False,
            )
        if run.called:
            return say_line(
                f"{FAIL} {name}: on input {case.describe()} your function called {run.called}: "
                f"{forbidden[run.called]}.",
                quiet,
                False,
            )
        if run.error is not None:
            return say_line(_raised_line(name, case, run.error, hint_for(name, hint, fn=fn)), quiet, False)
        if free is not None and not judge:
            got = free(case.args, expected, got)
        why, question = _judged(case, expected, got, judge=judge, atol=atol, rtol=rtol)
        if not why and no_mutation and _mutated(case, args, kwargs):
            # the whole diagnosis: the exercise's hint is about another mistake
            return say_line(
                f"{FAIL} {name}: on input {case.describe()}: {_mutated(case, args, kwargs)}", quiet, False
            )
        if why:
            diagnosis = question or _diagnosis(explain, ratio_hints, fn, case, expected, got)
            warn = f" (it warned {said})" if said else ""
            line = f"{FAIL} {name}: on input {case.describe()}: {why}{warn}."
            return say_line(line + hint_for(name, hint, diagnosis, fn), quiet, False)
        if said and not warned:
            warned = f" (note: on input {case.describe()} it warned {said}; the result was right)"
    met = "meets the goal" if judge else "matches the reference"
    fixed = ", at every position the exercise fixes" if free is not None and not judge else ""
    counted = "its one case" if len(cases) == 1 else f"all {len(cases)} cases"
    return say_line(f"{PASS} {name}: {met} on {counted}{fixed}.{warned}", quiet, True)


def _kind(t: torch.Tensor) -> str:
    return "bool" if t.dtype == torch.bool else "float" if t.is_floating_point() else "integer"


def same_layout(expected, got) -> bool:
    """True when ``got`` is a tensor of ``expected``'s shape and kind (bool, integer or float; int32
    labels are as right as int64 ones): where a ``free=`` function may copy the reference's values
    into it (anything else is left for the comparison to name)."""
    return (
        isinstance(expected, torch.Tensor)
        and isinstance(got, torch.Tensor)
        and got.shape == expected.shape
        and _kind(got) == _kind(expected)
    )


def first_label_free(args: tuple, expected, got):
    """``free=`` of a labels exercise (``(N, L)`` labels): the label at position 0 of every row is
    the learner's, since the shift drops it and it is never anyone's target; labels that differ
    from the reference only there are as right as the reference's."""
    if same_layout(expected, got) and got.dim() == 2 and got.shape[1] > 0:
        got = got.clone()
        got[:, 0] = expected[:, 0].to(got.dtype)
    return got


def answer_digest(name: str, key, answer) -> str:
    """The SHA-256 (hex) of one answer of ``check_choices`` exercise ``name``: what an answer key
    stores, so that reading the key does not give the answers."""
    import hashlib

    return hashlib.sha256(f"{name}\x00{key!r}\x00{answer!r}".encode()).hexdigest()


def check_choices(
    name: str,
    answers_fn: Callable[[], dict],
    expected: dict[Any, Any],
    hints: dict[Any, str] | None = None,
    *,
    hint: str | tuple[str, str] = "",
    choices: Iterable | None = None,
    forbid: Iterable[str] | dict[str, str] | None = None,
    as_answer: Callable[[Any], Any] | None = None,
) -> CheckResult:
    """Grade a dict of named answers (e.g. which bug each mystery pipeline has). ``expected`` maps
    each key to :func:`answer_digest` of its right answer (a key stored in the clear would hand
    out the answers to whoever reads it). ``choices``: the allowed answers, when there is a list
    (an answer outside it is named: that says nothing about which answer is right). ``forbid``,
    as for :func:`check`: calls recorded while ``answers_fn`` runs (a search of the key by
    hashing every choice, or of the checker itself: :func:`key_search_refused`) fail it.
    ``as_answer`` reads each answer into the key's form (``"8"`` as ``8``), so another spelling passes.

    No oracle: a failure says that not every answer is right, never how many nor which, so
    changing one answer at a time and watching the line teaches nothing. It adds one question,
    ``hints`` for the key whose turn it is: the n-th failure of ``name`` in this kernel asks about
    the n-th key (cycling), a rule that reads neither the answers nor the key; where ``hints``
    has no entry, ``hint`` (a string or a (nudge, full) pair, as for :func:`check`; also what
    ``show_solution`` gives) comes instead."""
    forbidden = _forbidden(forbid)
    run = run_learner(answers_fn, forbidden=forbidden)
    answers = run.value
    if run.todo:
        return say_line(f"{TODO} {name}: fill in your answers, then re-run.", False, False)
    if run.called:
        return say_line(
            f"{FAIL} {name}: your function called {run.called}: {forbidden[run.called]}.", False, False
        )
    if run.error is not None:
        return say_line(
            f"{FAIL} {name}: your function raised {type(run.error).__name__}: {_sentence(str(run.error)[:200])}",
            False,
            False,
        )
    if not isinstance(answers, dict):
        return say_line(
            f"{FAIL} {name}: expected a dict of answers, got {type(answers).__name__}.", False, False
        )
    if as_answer is not None:
        answers = {k: as_answer(v) for k, v in answers.items()}
    missing = [k for k in expected if k not in answers]
    if missing:
        return say_line(f"{FAIL} {name}: no answer for {missing[0]!r}.", False, False)
    extra = [k for k in answers if k not in expected]
    if extra:
        return say_line(
            f"{FAIL} {name}: {extra[0]!r} is not one of the questions ({', '.join(map(repr, expected))}).",
            False,
            False,
        )
    allowed = None if choices is None else list(choices)
    outside = [k for k in expected if allowed is not None and answers[k] not in allowed]
    if outside:
        k = outside[0]
        return say_line(
            f"{FAIL} {name}: the answer for {k!r}, {answers[k]!r}, is not one of the choices.", False, False
        )
    if any(answer_digest(name, k, answers[k]) != expected[k] for k in expected):
        _TURNS[name] = _TURNS.get(name, 0) + 1
        keys = list(expected)
        k = keys[(_TURNS[name] - 1) % len(keys)]
        own = (hints or {}).get(k, "")
        said = (
            f" A question on {k!r} (the questions take each one in turn, right or wrong): {own}"
            if own
            else hint_for(name, hint)
        )
        return say_line(
            f"{FAIL} {name}: not all {len(expected)} answers are right (the check does not say which, "
            f"nor how many: the code decides).{said}",
            False,
            False,
        )
    return say_line(f"{PASS} {name}: all {len(expected)} answers right.", False, True)


def key_search_refused(advice: str, checker: str) -> dict[str, str]:
    """The ``forbid=`` entries every ``check_choices`` exercise needs: hashing choices against the
    key (told ``advice``, what to do instead), and asking a checker, ``check_choices`` or the
    exercise's own (``checker``, its dotted name)."""
    search = f"that searches the answer key: {advice}"
    asking = "that asks the checker: the checker is no oracle, the code is"
    return {
        "lmcore.course.checks.answer_digest": search,
        "hashlib.sha256": search,
        "hashlib.new": search,
        "lmcore.course.checks.check_choices": asking,
        checker: asking,
    }


_TURNS: dict[str, int] = {}  # check_choices name -> failures so far: whose question comes next


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
from ..autograding import when_grading as _when_grading  # noqa: E402

check, check_choices = _when_grading(check), _when_grading(check_choices)
