"""The printing policy on every committed notebook: ignored outputs have a checked verdict after
them, and every decimal number the prose quotes is one the notebook prints (or is declared)."""

from pathlib import Path

import pytest

from lmcore.course.build import nbpolicy

ROOT = Path(__file__).resolve().parents[2]
# the English notebooks and the translated editions (their code and outputs are the English ones)
NOTEBOOKS = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("zh/notebooks/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: "/".join(p.parts[-3:]))
def test_every_ignored_output_has_a_verdict(path):
    nb = nbpolicy.load(path)
    bad = nbpolicy.unverified_ignored_cells(nb)
    assert not bad, (
        f"{path.name}: cells {bad} hide their output from nbval but no checked verdict "
        f"(lmcore.course.verdict) follows them before the next heading"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: "/".join(p.parts[-3:]))
def test_prose_numbers_are_printed_or_declared(path):
    nb = nbpolicy.load(path)
    bad = nbpolicy.unmatched_prose_numbers(nb)
    assert not bad, (
        f"{path.name}: prose quotes numbers no output prints (cell, number): {bad}; "
        f"print them, quote a verdict's range, or declare them with a reason in "
        f"metadata['lmcore']['prose_numbers']"
    )


def test_declared_prose_numbers_have_reasons():
    for path in NOTEBOOKS:
        declared = nbpolicy.load(path).get("metadata", {}).get("lmcore", {}).get("prose_numbers", {})
        for number, reason in declared.items():
            assert isinstance(reason, str) and len(reason.strip()) >= 5, (path.name, number)


def _nb(cells, metadata=None):
    return {"cells": cells, "metadata": metadata or {}}


def _code(src, outputs=(), tags=()):
    return {
        "cell_type": "code",
        "source": src,
        "metadata": {"tags": list(tags)},
        "outputs": [{"output_type": "stream", "name": "stdout", "text": t} for t in outputs],
    }


def _md(src):
    return {"cell_type": "markdown", "source": src, "metadata": {}}


def test_policy_checker_catches_an_ignored_measurement_without_verdict():
    nb = _nb([_code("# NBVAL_IGNORE_OUTPUT\nprint(loss)", ["2.3171"]), _md("## next")])
    assert nbpolicy.unverified_ignored_cells(nb) == [0]
    nb_ok = _nb(
        [
            _code("# NBVAL_IGNORE_OUTPUT\nprint(loss)", ["2.3171"]),
            _code("in_range('loss', loss, 2, 2.6)", ["loss in [2, 2.6]: yes"]),
        ]
    )
    assert nbpolicy.unverified_ignored_cells(nb_ok) == []
    # a verdict hidden from nbval does not count, nor one after the next heading
    nb_hidden = _nb(
        [
            _code("# NBVAL_IGNORE_OUTPUT\nprint(loss)", ["2.3171"]),
            _code("# NBVAL_IGNORE_OUTPUT\nin_range('loss', loss, 2, 2.6)", ["loss in [2, 2.6]: yes"]),
        ]
    )
    assert nbpolicy.unverified_ignored_cells(nb_hidden) == [0, 1]
    nb_late = _nb(
        [
            _code("# NBVAL_IGNORE_OUTPUT\nprint(loss)", ["2.3171"]),
            _md("## 2. Other"),
            _code("near('x', x, 1, 0.1)"),
        ]
    )
    assert nbpolicy.unverified_ignored_cells(nb_late) == [0]
    # interact cells and device/timing cells are exempt
    assert nbpolicy.unverified_ignored_cells(_nb([_code("# NBVAL_IGNORE_OUTPUT\ninteract(f, x=1)")])) == []
    assert (
        nbpolicy.unverified_ignored_cells(
            _nb([_code("print(dev)", tags=["nbval-ignore-output", "varies-device"])])
        )
        == []
    )


def test_policy_checker_matches_prose_numbers_by_written_digits():
    nb = _nb(
        [
            _md("The loss is 2.77 and then 0.5; Python 3.11.7; see [x](a/0.3.html)."),
            _code("print(x)", ["loss 2.7726 and 0.4999\n"]),
        ]
    )
    assert nbpolicy.prose_numbers(nb) == [(0, "2.77"), (0, "0.5")]
    assert nbpolicy.unmatched_prose_numbers(nb) == []
    nb_bad = _nb([_md("The loss is 2.78."), _code("print(x)", ["2.7726\n"])])
    assert nbpolicy.unmatched_prose_numbers(nb_bad) == [(0, "2.78")]
    # more digits in the prose than printed never match
    nb_precise = _nb([_md("exactly 2.7726"), _code("print(x)", ["2.77\n"])])
    assert nbpolicy.unmatched_prose_numbers(nb_precise) == [(0, "2.7726")]
    declared = _nb(
        [_md("init std 0.02"), _code("pass")],
        {"lmcore": {"prose_numbers": {"0.02": "the init std, a definition"}}},
    )
    assert nbpolicy.unmatched_prose_numbers(declared) == []


def test_the_course_maps_checked_outputs_are_the_notebooks():
    """The README's "checked outputs" column is what nbpolicy counts in each committed notebook
    (nbtools merges a print's stream outputs, so the count does not move with the machine's load)."""
    stated = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0].isdigit() and cells[1].startswith("["):
            stated[cells[0]] = int(cells[-1])
    counted = {p.name[:2]: nbpolicy.checked_output_count(nbpolicy.load(p)) for p in NOTEBOOKS[:11]}
    assert len(stated) == 11 and stated == counted
