"""The grading machinery itself: pass, fail with a reason, 'not attempted yet', mutation."""

import numpy as np
import pytest
import torch

from lmcore.course.checks import Case, check, check_choices, compare


def ref_double(x):
    return [2 * v for v in x]


def test_compare_matches_numbers_arrays_tensors_and_structures():
    assert compare(1.0, 1.0 + 1e-9) is None
    assert compare(np.array([1.0, 2.0]), torch.tensor([1.0, 2.0])) is None
    assert compare((1.0, [1, 2]), (1.0, [1, 2])) is None
    assert "shape" in compare(np.zeros(3), np.zeros(4))
    assert "non-finite" in compare(np.ones(2), np.array([np.nan, 1.0]))
    assert compare({"a": 1}, {"a": 2}) is not None
    assert compare("x", "y") is not None
    assert compare(np.array([True, False]), np.array([True, True])) is not None


def test_check_passes_the_reference(capsys):
    assert check("double", ref_double, ref_double, [([1, 2],), ([0.5],)])
    assert capsys.readouterr().out.startswith("✓ pass double")


def test_check_reports_the_first_mismatch_with_hint(capsys):
    assert not check("double", lambda x: [3 * v for v in x], ref_double, [([1, 2],)], hint="twice")
    out = capsys.readouterr().out
    assert out.startswith("✗ fail double") and "Hint: twice" in out and "[1, 2]" in out


def test_check_says_not_attempted_for_a_stub(capsys):
    def stub(x):
        raise NotImplementedError

    assert not check("double", stub, ref_double, [([1],)])
    assert "not attempted yet" in capsys.readouterr().out


def test_check_reports_exceptions_and_mutation(capsys):
    assert not check("double", lambda x: 1 / 0, ref_double, [([1],)])
    assert "ZeroDivisionError" in capsys.readouterr().out

    def mutating(t):
        t.mul_(2)
        return t

    assert not check("double", mutating, lambda t: t * 2, [Case((torch.ones(3),))])
    assert "modified its input" in capsys.readouterr().out


def test_check_choices(capsys):
    from lmcore.course.checks import answer_digest

    right = {"a": "shift", "b": "pad"}
    key = {k: answer_digest("bugs", k, v) for k, v in right.items()}  # the key stores digests
    assert "shift" not in str(key) and "pad" not in str(key)
    assert check_choices("bugs", lambda: dict(right), key)
    assert not check_choices("bugs", lambda: {"a": "shift", "b": "eos"}, key, {"b": "look at padding"})
    assert "not all 2 answers are right" in capsys.readouterr().out.splitlines()[-1]
    assert not check_choices("other exercise", lambda: dict(right), key)  # digests are per exercise

    def stub():
        raise NotImplementedError

    assert not check_choices("bugs", stub, key)
    assert "not attempted yet" in capsys.readouterr().out


def test_check_choices_is_no_oracle(monkeypatch, capsys):
    """Issue 38: "1/2 right; 'b' is not 'eos'" let a learner change one answer at a time and watch
    the count. A failure says only that not all are right; its question rotates over the keys
    with the failures, whatever the answers: two wrong sets at the same turn print the same line."""
    from lmcore.course import checks
    from lmcore.course.checks import answer_digest

    right = {"a": "shift", "b": "pad", "c": "eos"}
    key = {k: answer_digest("bugs", k, v) for k, v in right.items()}
    hints = {k: f"a question on {k}?" for k in right}
    lines = {}
    for wrong in ({"a": "pad"}, {"c": "shift"}, {"a": "eos", "b": "eos", "c": "eos"}):
        for turn in range(4):
            monkeypatch.setattr(checks, "_TURNS", {"bugs": turn})
            assert not check_choices(
                "bugs", lambda w=wrong: dict(right, **w), key, hints, choices=["shift", "pad", "eos"]
            )
            line = capsys.readouterr().out
            assert "/3" not in line and "not all 3 answers are right" in line
            assert f"a question on {'abc'[turn % 3]}?" in line  # the turn decides, not the answers
            lines.setdefault(turn, set()).add(line)
    assert all(len(v) == 1 for v in lines.values()), lines
    # a missing key or an answer outside the choices is named: it says nothing about the key
    assert not check_choices("bugs", lambda: {"a": "shift"}, key, hints, choices=["shift", "pad", "eos"])
    assert "no answer for 'b'" in capsys.readouterr().out
    assert not check_choices(
        "bugs", lambda: dict(right, b="padd"), key, hints, choices=["shift", "pad", "eos"]
    )
    assert "'padd', is not one of the choices" in capsys.readouterr().out
    # so is an answer to a question that was not asked (a mystery "d" that does not exist)
    assert not check_choices(
        "bugs", lambda: dict(right, d="pad"), key, hints, choices=["shift", "pad", "eos"]
    )
    assert "'d' is not one of the questions ('a', 'b', 'c')" in capsys.readouterr().out


def test_check_choices_refuses_a_search_of_the_key(capsys):
    import hashlib

    from lmcore.course.checks import answer_digest

    right = {"a": "shift", "b": "pad"}
    key = {k: answer_digest("bugs", k, v) for k, v in right.items()}

    def search():
        return {
            k: next(c for c in ("shift", "pad") if answer_digest("bugs", k, c) == d) for k, d in key.items()
        }

    assert check_choices("bugs", search, key)  # without forbid= the search works: hence forbid=
    capsys.readouterr()
    forbid = {"lmcore.course.checks.answer_digest": "no search", "hashlib.sha256": "no search"}
    assert not check_choices("bugs", search, key, forbid=forbid)
    assert "your function called lmcore.course.checks.answer_digest: no search" in capsys.readouterr().out

    def by_sha256():
        hashlib.sha256(b"x").hexdigest()
        return dict(right)

    assert not check_choices("bugs", by_sha256, key, forbid=forbid)
    assert "called hashlib.sha256" in capsys.readouterr().out
    assert answer_digest("bugs", "a", "shift") == key["a"]  # usable again afterwards


def test_compare_rejects_a_dtype_of_another_kind_where_it_carries_meaning():
    labels = torch.tensor([[3, -100], [4, 5]])
    assert compare(labels, labels.clone()) is None
    assert compare(labels, labels.int()) is None  # the width may differ
    why = compare(labels, labels.float())
    assert why and "integer" in why and "float32" in why
    mask = torch.tensor([[True, False], [True, True]])
    assert compare(mask, mask.clone()) is None
    why = compare(mask, mask.float())
    assert why and "bool" in why and "added" in why
    assert "bool" in compare(mask, mask.long())
    assert compare(np.array([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64)) is None
    assert "floating-point" in compare(torch.tensor([1.0, 2.0]), torch.tensor([1, 2]))
    assert compare(3, 3.0) is None and compare([1, 2], [1.0, 2.0]) is None  # plain numbers: values only


def test_check_rejects_float_labels_and_float_masks(capsys):
    from lmcore.shift import document_causal_mask, labels_from_attention_mask

    ids, mask = torch.tensor([[5, 6, 7, 0]]), torch.tensor([[1, 1, 1, 0]])
    assert check("labels", labels_from_attention_mask, labels_from_attention_mask, [(ids, mask)])
    assert not check(
        "labels",
        lambda i, m: labels_from_attention_mask(i, m).float(),
        labels_from_attention_mask,
        [(ids, mask)],
    )
    doc = torch.tensor([[0, 0, 1, 1]])
    assert not check("mask", lambda d: document_causal_mask(d).float(), document_causal_mask, [(doc,)])
    assert "added" in capsys.readouterr().out


# ---------------------------------------------------------------- feedback a person reads


def test_a_check_result_is_true_or_false_and_displays_nothing(capsys):
    from lmcore.course.checks import CheckResult

    ok = check("double", ref_double, ref_double, [([1, 2],)])
    bad = check("double", lambda x: x, ref_double, [([1, 2],)])
    assert isinstance(ok, CheckResult) and ok and ok == True and not bad and bad == False  # noqa: E712
    assert ok.line.startswith("✓ pass") and bad.line.startswith("✗ fail")
    assert ok._ipython_display_() is None  # IPython shows nothing under the printed line


def test_a_check_cell_leaves_no_stray_value_in_a_notebook():
    """Run a check as a cell's last expression in a real kernel: its one line, no Out[]."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from lmcore.course.checks import check\ncheck('double', lambda x: 2 * x, lambda x: 2 * x, [(1,)])"
        )
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["stream"]
    assert outputs[0].text.startswith("✓ pass double")


def test_failure_names_the_first_differing_position_and_the_max_delta():
    want = np.zeros((3, 4))
    got = want.copy()
    got[1, 2] = 0.5
    why = compare(want, got)
    assert "first difference at [1, 2]" in why and "expected 0, got 0.5" in why and "max |Δ| = 0.5" in why
    assert "1 of 12 entries differ" in why and "allowed 1e-06" in why


def test_a_failure_line_never_shows_two_equal_looking_numbers():
    """05's float32 perplexity once read "expected 7.054, got 7.054": digits are added until the two differ."""
    why = compare(7.05412345, 7.05419, atol=0, rtol=1e-9)
    assert "expected 7.0541, got 7.0542" in why
    why = compare(np.array([1.0, 2.000001]), np.array([1.0, 2.000002]), atol=0, rtol=1e-9)
    assert "expected 2.000001, got 2.000002" in why
    assert "expected 1, got 2" in compare(1.0, 2.0)


def test_failure_gives_the_ratio_when_the_result_is_a_constant_times_the_expected(capsys):
    x = torch.randn(60, 70, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert not check(
        "grad", lambda t: t / 4, lambda t: t.clone(), [(x,)], ratio_hints={0.25: "did you divide by n twice?"}
    )
    out = capsys.readouterr().out
    assert "0.25x the expected everywhere" in out and "Did you divide by n twice?" in out
    assert len(out.splitlines()) == 1 and len(out) < 600  # one line, no 4,200-entry repr
    assert "shape (60, 70)" in out and str(float(x[0, 5])) not in out  # rounded, not raw float64


def test_a_nan_result_says_where():
    why = compare(np.array([0.2, 0.3, 0.5]), np.array([0.2, np.nan, np.nan]))
    assert "nan at [1]" in why and "2 of 3 entries non-finite" in why


def test_a_warning_is_named_not_written_to_stderr_and_a_right_answer_still_passes(capsys):
    def textbook(p):  # np.where evaluates both branches: log(0) warns, the result is right
        p = np.asarray(p, dtype=np.float64)
        return np.where(p > 0, -p * np.log(p), 0.0)

    reference = lambda p: np.where(np.asarray(p) > 0, -np.asarray(p) * np.log(np.maximum(p, 1e-300)), 0.0)  # noqa: E731
    assert check("entropy terms", textbook, reference, [(np.array([0.0, 0.5, 0.5]),)])
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("✓ pass") and "RuntimeWarning: divide by zero" in out

    def naive(z):
        e = np.exp(z)
        return e / e.sum()

    assert not check(
        "softmax",
        naive,
        lambda z: np.exp(z - z.max()) / np.exp(z - z.max()).sum(),
        [(np.array([1000.0, 0.0]),)],
    )
    out, err = capsys.readouterr()
    assert err == "" and "it warned RuntimeWarning: overflow" in out and "nan at [0]" in out


def test_a_call_to_a_forbidden_reference_is_rejected_however_it_was_imported(capsys):
    from lmcore import handcalc
    from lmcore.handcalc import softmax as renamed

    forbid = {"lmcore.handcalc.softmax": "write it yourself", "torch.softmax": "write it yourself"}
    cases = [(np.array([2.0, 1.0, 0.0]),)]
    for cheat in (
        handcalc.softmax,
        lambda z: renamed(z),
        lambda z: torch.softmax(torch.tensor(z), -1).numpy(),
    ):
        assert not check("softmax", cheat, handcalc.softmax, cases, forbid=forbid)
        line = capsys.readouterr().out
        assert "your function called" in line and "write it yourself" in line
    own = lambda z: np.exp(z - z.max()) / np.exp(z - z.max()).sum()  # noqa: E731
    assert check("softmax", own, handcalc.softmax, cases, forbid=forbid)


def test_a_decorated_right_answer_is_never_taken_for_a_decorated_reference(capsys):
    """torch.no_grad(), torch.inference_mode() and functools.wraps share one wrapper's code among
    every function they decorate; the guard matches the reference's own body beneath them."""
    import functools

    @torch.no_grad()
    def reference(t):
        return t * 2

    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            return fn(*a, **k)

        return wrapper

    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    forbid = {f"{__name__}.REFERENCE_NO_GRAD": "write it yourself"}
    globals()["REFERENCE_NO_GRAD"] = reference
    try:
        for decorate in (torch.no_grad(), torch.inference_mode(), logged):
            mine = decorate(lambda t: t + t)
            assert check("double", mine, reference, [(x,)], forbid=forbid), capsys.readouterr().out
        capsys.readouterr()
        for cheat in (reference, torch.no_grad()(lambda t: reference(t)), logged(reference)):
            assert not check("double", cheat, reference, [(x,)], forbid=forbid)
            assert "your function called" in capsys.readouterr().out
    finally:
        del globals()["REFERENCE_NO_GRAD"]


def test_a_tensor_method_and_autograd_can_be_forbidden(capsys):
    forbid = ["torch.Tensor.softmax", "torch.autograd.grad", "torch.Tensor.backward"]
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    assert not check("s", lambda t: t.softmax(-1), lambda t: torch.softmax(t, -1), [(x,)], forbid=forbid)
    assert "torch.Tensor.softmax" in capsys.readouterr().out

    def autograd_square_grad(t):
        with torch.enable_grad():
            t = t.detach().requires_grad_(True)
            (t**2).sum().backward()
            return t.grad

    assert not check("g", autograd_square_grad, lambda t: 2 * t, [(x,)], forbid=forbid)
    assert "torch.Tensor.backward" in capsys.readouterr().out
    assert check("g", lambda t: 2 * t, lambda t: 2 * t, [(x,)], forbid=forbid)


def test_mutation_advice_fits_the_library(capsys):
    def mutate(a):
        a *= 2
        return a

    assert not check("d", mutate, lambda a: a * 2, [(np.ones(2),)])
    assert "x.copy()" in capsys.readouterr().out
    assert not check("d", mutate, lambda a: a * 2, [(torch.ones(2),)])
    assert "x.clone()" in capsys.readouterr().out


def test_a_two_part_hint_nudges_and_leaves_the_full_hint_to_show_solution(capsys):
    """From the second failure on the line says how to ask for more: show_solution with the
    learner's function name when that names an exercise, a generic call otherwise."""
    name = "hint order (test only)"

    def surprise(x):  # the name of notebook 00's exercise
        return x

    def my_double(x):  # no exercise has this name
        return x

    for fn in (surprise, surprise, my_double, lambda x: x):
        assert not check(name, fn, ref_double, [([1],)], hint=("which factor?", "multiply by 2"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("Hint: which factor?")
    assert lines[1].endswith('Hint: which factor? Stuck? show_solution("surprise") gives the fuller hint.')
    generic = (
        "Stuck? show_solution, given the name of the function this exercise asks for, gives the fuller hint."
    )
    assert lines[2].endswith(generic) and lines[3].endswith(generic)
    assert not any("multiply by 2" in li for li in lines)


def test_a_renamed_function_is_still_told_which_exercise_show_solution_takes(capsys):
    """A learner's function under another name than the exercise's: the course's check function
    that runs the check names the exercise (05's check_eos_padded_labels: my_eos_padded_labels)."""
    from lmcore.course.padding.exercises import check_eos_padded_labels

    def labels_v2(input_ids, eos_id):  # keeps every EOS: the padding is scored
        return input_ids.clone()

    for _ in range(2):
        assert not check_eos_padded_labels(labels_v2)
    second = capsys.readouterr().out.strip().splitlines()[-1]
    assert 'Stuck? show_solution("my_eos_padded_labels") gives the fuller hint.' in second


def test_a_single_number_names_a_simple_ratio_only():
    assert "that is 0.5x the expected" in compare(2.0, 1.0)
    assert "x the expected" not in compare(1.0, 0.9698)


def test_underflow_is_not_worth_a_note(capsys):
    stable = lambda z: np.exp(z - z.max()) / np.exp(z - z.max()).sum()  # noqa: E731
    assert check("softmax", stable, stable, [(np.array([-1000.0, 0.0, 1000.0]),)])
    assert "warned" not in capsys.readouterr().out


def test_float32_atol_scales_with_the_largest_input_and_check_takes_it_per_case(capsys):
    from lmcore.course.checks import EPS32, float32_atol

    assert float32_atol(torch.tensor([1000.0, -5.0])) == pytest.approx(8 * EPS32 * 1000)
    assert float32_atol(np.array([0.5]), torch.tensor([-2000.0])) == pytest.approx(8 * EPS32 * 2000)
    assert float32_atol(torch.tensor([0.1])) == 1e-6  # the floor
    ref = lambda z: float(torch.logsumexp(z.double(), 0))  # noqa: E731
    mine = lambda z: float(torch.logsumexp(z.float(), 0)) + 4 * EPS32 * float(z.abs().max())  # noqa: E731
    cases = [(torch.tensor([1000.0, 999.5]),), (torch.tensor([1.0, 0.5]),)]
    assert check("lse", mine, ref, cases, atol=lambda z: float32_atol(z), rtol=0)
    assert not check("lse", lambda z: ref(z) + 1e-3, ref, cases, atol=lambda z: float32_atol(z), rtol=0)
    out = capsys.readouterr().out  # the first case's own tolerance, with its digits
    assert "on input (tensor([1000.0, 999.5]))" in out and "allowed 0.00095 + 0·|expected|" in out


def test_a_mutation_is_the_whole_diagnosis_without_the_exercises_hint(capsys):
    def sorts_in_place(x):
        x.sort()
        return x.sum()

    x = np.array([3.0, 1.0, 2.0])
    assert not check(
        "sum", sorts_in_place, lambda x: x.sum(), [(x,)], hint=("a nudge about another mistake", "full")
    )
    out = capsys.readouterr().out
    assert "modified its input in place" in out and "the result itself was right" in out
    assert "nudge" not in out and "Hint" not in out


def test_integer_results_fail_without_a_float_tolerance(capsys):
    ids = np.array([[5, 6, 7], [8, 9, 10]])
    assert not check("labels", lambda a: np.where(a > 8, -100, a), lambda a: a.copy(), [(ids,)])
    out = capsys.readouterr().out
    assert "first difference at [1, 1]: yours is -100 there; 2 of 6 entries differ" in out
    assert "expected 9" not in out  # the right label at that position is the answer: not shown
    assert "allowed" not in out and "max |Δ|" not in out


def test_a_diagnosis_keyed_to_the_mistake_stands_in_for_the_nudge(capsys):
    """explain= names the property this answer broke: on the first failure it replaces the nudge
    (written for another mistake), later it comes before the full hint; one that raises or has
    nothing to say leaves the nudge; a ratio note is the diagnosis, the nudge is not added to it."""
    hint = ("is it even?", "multiply by 2")

    def says(fn, case, expected, got):
        return f"at {case.args[0]} yours is {got}: which sign?" if got < 0 else ""

    name = "keyed hint (test only)"
    for _ in range(2):
        assert not check(name, lambda x: -x, lambda x: 2 * x, [(3,)], hint=hint, explain=says)
    first, second = capsys.readouterr().out.splitlines()
    assert first.endswith("Hint: at 3 yours is -3: which sign?") and "is it even?" not in first
    assert second.endswith(
        "Hint: at 3 yours is -3: which sign? Stuck? show_solution, given the name of the function this exercise asks for, gives the fuller hint."
    )

    def broken(fn, case, expected, got):
        raise RuntimeError("a diagnosis with a bug")

    for explain in (broken, says):  # got 1 >= 0: says has nothing to say
        assert not check(
            f"fallback {explain.__name__} (test only)",
            lambda x: 1,
            lambda x: 2 * x,
            [(3,)],
            hint=hint,
            explain=explain,
        )
        assert capsys.readouterr().out.strip().endswith("Hint: is it even?")
    assert not check(
        "ratio (test only)",
        lambda x: x,
        lambda x: 2 * x,
        [(3.0,)],
        hint=hint,
        ratio_hints={0.5: "which factor is missing?"},
    )
    out = capsys.readouterr().out
    assert out.strip().endswith("Hint: Which factor is missing?") and "is it even?" not in out


def test_a_judge_grades_against_a_goal_so_every_right_answer_passes(capsys):
    """judge= replaces the one reference: any result that meets the goal passes (here: a list
    holding exactly the even numbers of the input, in any order); a failure shows what the judge
    found and its question, and a mutation or a stub is still caught."""

    def evens(xs, got):
        if sorted(got) != sorted(x for x in xs if x % 2 == 0):
            return f"your list is {sorted(got)}", "which of the inputs are even?"
        return "", ""

    cases = [Case(([1, 2, 3, 4],)), Case(([6, 5, 8],))]
    assert check("evens", lambda xs: [x for x in xs if x % 2 == 0], None, cases, judge=evens)
    assert check(
        "evens", lambda xs: sorted((x for x in xs if x % 2 == 0), reverse=True), None, cases, judge=evens
    )
    assert "meets the goal on all 2 cases" in capsys.readouterr().out
    assert not check("evens", lambda xs: [x for x in xs if x % 2], None, cases, judge=evens)
    out = capsys.readouterr().out
    assert "your list is [1, 3]" in out and "which of the inputs are even?" in out

    def mutates(xs):
        xs.append(0)
        return [x for x in xs[:-1] if x % 2 == 0]

    assert not check("evens", mutates, None, cases, judge=evens)
    assert "modified its input" in capsys.readouterr().out

    def stub(xs):
        raise NotImplementedError

    check("evens", stub, None, cases, judge=evens)
    assert "not attempted yet" in capsys.readouterr().out


def test_free_takes_the_reference_values_only_where_the_learner_may_choose(capsys):
    """free= copies the reference's values into the learner's result where they are the
    learner's to choose (here: position 0 of every row of labels, which the shift drops), after
    the call: the reference is not wrapped, a difference elsewhere still fails and names its
    position, and a result of another dtype or shape is left for the comparison to name."""
    from lmcore.course.checks import first_label_free

    calls = []

    def reference(x):
        calls.append(x.clone())
        return x.masked_fill(x == 0, -100)

    cases = [Case((torch.tensor([[0, 3, 0, 4], [5, 0, 6, 7]]),))]
    differs_at_0 = lambda x: reference(x).index_fill(1, torch.tensor([0]), 9)  # noqa: E731
    assert not check("labels", differs_at_0, reference, cases)
    capsys.readouterr()
    assert check("labels", differs_at_0, reference, cases, free=first_label_free)
    # the pass line does not claim the free positions match: they may not
    assert (
        "matches the reference on its one case, at every position the exercise fixes."
        in capsys.readouterr().out
    )
    assert torch.equal(calls[-1], cases[0].args[0])  # the reference saw the case as it is

    def differs_at_2(x):
        out = reference(x)
        out[1, 2] = -100
        return out

    assert not check("labels", differs_at_2, reference, cases, free=first_label_free)
    assert "[1, 2]" in capsys.readouterr().out
    as_float = lambda x: reference(x).float()  # noqa: E731
    assert not check("labels", as_float, reference, cases, free=first_label_free)
    assert "dtype" in capsys.readouterr().out
    int32_differs_at_0 = lambda x: differs_at_0(x).to(torch.int32)  # noqa: E731
    assert check("labels", int32_differs_at_0, reference, cases, free=first_label_free)


def test_an_exact_fraction_is_a_number():
    from fractions import Fraction

    assert compare(5 / 7, Fraction(5, 7)) is None
    assert "0.7143" in compare(0.5, Fraction(5, 7))


def test_a_forbidden_numpy_ufunc_is_seen_called_directly_and_through_its_methods(capsys):
    """numpy.logaddexp forbidden: np.logaddexp(a, b) in a loop is refused as .reduce is, the ufunc
    is itself again after the check, and a function that never calls it passes."""
    from functools import reduce

    ref = lambda z: float(np.log(np.exp(z).sum()))  # noqa: E731
    forbid = {"numpy.logaddexp": "write it yourself"}
    cases = [Case((np.array([0.5, 1.0, 2.0]),))]
    for cheat in (lambda z: float(reduce(np.logaddexp, z)), lambda z: float(np.logaddexp.reduce(z))):
        assert not check("lse", cheat, ref, cases, forbid=forbid)
        assert "called numpy.logaddexp" in capsys.readouterr().out
    assert isinstance(np.logaddexp, np.ufunc)
    assert check("lse", ref, ref, cases, forbid=forbid)


def test_a_half_precision_result_is_asked_about_its_precision_not_its_maths(capsys):
    """A float16 or bfloat16 answer that fails only by its rounding gets a question about
    precision, not the exercise's note about a mistake in the maths (stop 56's learner pass)."""
    import numpy as np

    from lmcore.course.softmax_nll.lesson import check_stable_softmax

    def half(z):
        e = np.exp((z - z.max()).astype(np.float16))
        return e / e.sum()

    assert not check_stable_softmax(half)
    out = capsys.readouterr().out
    assert "float16" in out and "significant digits" in out
    from lmcore.course.checks import _half_precision

    assert "bfloat16" in _half_precision((torch.zeros(2, dtype=torch.bfloat16), 1.0))
    assert _half_precision(torch.zeros(2)) == "" and _half_precision(np.zeros(2)) == ""


def test_a_view_on_a_slice_is_asked_about_memory_layout_and_harmless_warnings_stay_quiet(capsys):
    ref = lambda x: x[:, :-1].reshape(-1)  # noqa: E731
    cases = [Case((torch.arange(12.0).view(3, 4),))]
    assert not check("flat", lambda x: x[:, :-1].view(-1), ref, cases)
    assert "slice that kept its parent's strides" in capsys.readouterr().out

    def warns_harmlessly(x):
        float(torch.ones((), requires_grad=True) * 2)  # a scalar read off a tensor that needs grad
        return ref(x)

    assert check("flat", warns_harmlessly, ref, cases)
    out = capsys.readouterr().out
    assert "its one case" in out and "warned" not in out


def test_a_value_is_told_a_mistake_only_when_it_sits_far_nearer_the_mistake_than_the_truth():
    from lmcore.course.checks import near_mistake

    assert near_mistake(1.3001, 1.3, 1.2)  # 1e-4 from the mistake, which is 0.1 from the truth
    assert not near_mistake(1.2004, 1.2006, 1.2)  # within 5e-4, but the mistake is only 6e-4 away
    assert not near_mistake(1.31, 1.3, 1.2)  # too far from the mistake


def test_check_choices_reads_each_answer_through_as_answer(capsys):
    from lmcore.course.checks import answer_digest, key_search_refused

    key = {"a": answer_digest("pick", "a", "far below")}
    written_otherwise = lambda: {"a": " Far  Below"}  # noqa: E731
    assert not check_choices("pick", written_otherwise, key)
    assert check_choices("pick", written_otherwise, key, as_answer=lambda v: " ".join(v.lower().split()))
    refused = key_search_refused("read the code", "my.checker")
    assert refused["my.checker"] == refused["lmcore.course.checks.check_choices"]
    assert "read the code" in refused["hashlib.sha256"]


def test_a_number_returned_as_text_is_asked_about_the_type_in_any_check(capsys):
    """The kit, not each exercise, tells a result written as text ("0.693147") from a wrong number."""
    assert not check(
        "text (test only)", lambda x: f"{2 * x:.6f}", lambda x: 2.0 * x, [(1.5,)], hint="which factor?"
    )
    out = capsys.readouterr().out
    assert "expected numbers like 3, got '3.000000'" in out and "returns text" in out
    assert "which factor?" not in out
