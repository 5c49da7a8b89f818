"""The grade report from nbgrader's gradebook: ``grades.csv``, ``feedback/<student>.md`` and the
class report (``class.md``, ``class.png``: :mod:`lmcore.course.build.class_report`).

One row per student, one column per exercise (``<notebook number>_<function>``) and the total;
the feedback gives per exercise the points and the check's own line with its hint (or why the
test cell stopped), then notes for the instructor (edited locked cells, redefined checkers).
Used by :mod:`lmcore.course.build.grade`.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import nbformat

from .class_report import write_class_report

__all__ = ["write_report", "notes_for", "explain", "column"]

_CHECK_LINE = re.compile(r"^[✓✗…] .*$", re.M)
_SUSPECT = re.compile(
    r"^\s*(def\s+check_\w+|[\w.]*check_\w+\s*=(?!=)|[\w.]*lmcore[\w.]*\.\w+\s*=(?!=)|"
    r"setattr\(|import\s+builtins)",
    re.M,
)


def column(notebook: str, grade_id: str) -> str:
    prefix = notebook.split("_")[0] if notebook[:2].isdigit() else notebook
    return f"{prefix}_{grade_id.removeprefix('test_')}"


def explain(cell, timeout: int) -> str:
    """One line for a graded cell of an autograded notebook: the check's line, or why it errored."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    lines = _CHECK_LINE.findall(text)
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if lines and (not errors or errors[0].get("ename") in ("NotPassed", "AssertionError")):
        return " ".join(lines)
    if not errors:
        return (
            "ran without error"
            if not any(o.get("name") == "stderr" for o in cell.get("outputs", []))
            else "the cell wrote to stderr (nbgrader gives no points then)"
        )
    ename, evalue = errors[0].get("ename", ""), errors[0].get("evalue", "")
    if ename in ("CellTimeoutError", "KeyboardInterrupt"):
        return f"stopped after the {timeout} s limit per cell (an endless loop?)"
    if ename == "NameError":
        return f"{ename}: {evalue} (the cell that defines it failed, e.g. a syntax error, or was deleted)"
    return f"{ename}: {evalue}"


def notes_for(submitted: Path, source: Path) -> list[str]:
    """What in a submission the instructor may want to look at: edited locked cells, redefinitions."""
    notes = []
    sub, src = nbformat.read(submitted, as_version=4), nbformat.read(source, as_version=4)
    originals = {c.metadata["nbgrader"]["grade_id"]: c for c in src.cells if "nbgrader" in c.metadata}
    for cell in sub.cells:
        meta = cell.metadata.get("nbgrader", {})
        orig = originals.get(meta.get("grade_id"))
        if (
            orig is not None
            and orig.metadata["nbgrader"].get("locked")
            and cell.source.strip() != orig.source.strip()
        ):
            notes.append(
                f"{submitted.stem}: locked cell {meta['grade_id']} was edited; graded with the original"
            )
        elif (orig is None or not orig.metadata["nbgrader"].get("locked")) and cell.cell_type == "code":
            for m in _SUSPECT.finditer(cell.source):
                notes.append(
                    f"{submitted.stem}: a cell of the student's has `{m.group(1).strip()}`; "
                    "graded with the instructor's checkers (review it)"
                )
    return notes


def _score(gb, key, assignment, student) -> float:
    from nbgrader.api import MissingEntry

    try:
        return gb.find_grade(key[1], key[0], assignment, student).score
    except MissingEntry:  # nbgrader could not grade this submission
        return 0.0


def write_report(course, assignment, students, notes, out, timeout):
    """Read ``course``'s gradebook; write ``out/grades.csv`` and ``out/feedback/<student>.md``.
    Returns (rows, header, the maximum total)."""
    from nbgrader.api import Gradebook

    course, out = Path(course), Path(out)
    db_url = f"sqlite:///{(course / 'gradebook.db').resolve()}"
    columns, maxima, rows = [], {}, []
    with Gradebook(db_url) as gb:
        for nb in sorted(gb.find_assignment(assignment).notebooks, key=lambda n: n.name):
            order = [
                c.metadata["nbgrader"]["grade_id"]
                for c in nbformat.read(
                    course / "source" / assignment / f"{nb.name}.ipynb", as_version=4
                ).cells
                if c.metadata.get("nbgrader", {}).get("grade")
            ]
            for grade_id in order:
                columns.append((nb.name, grade_id))
                maxima[(nb.name, grade_id)] = gb.find_grade_cell(grade_id, nb.name, assignment).max_score
        for student in students:
            scores = {key: _score(gb, key, assignment, student) for key in columns}
            rows.append((student, scores))

    out.mkdir(parents=True, exist_ok=True)
    fmt = lambda x: f"{x:g}"  # noqa: E731
    header = ["student"] + [column(*k) for k in columns] + ["total"]
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for student, scores in rows:
            writer.writerow([student] + [fmt(scores[k]) for k in columns] + [fmt(sum(scores.values()))])
    (out / "feedback").mkdir(exist_ok=True)
    total_max = sum(maxima.values())
    lines_of = {}
    for student, scores in rows:
        lines = [f"# Feedback for {student}: {fmt(sum(scores.values()))} / {fmt(total_max)} points", ""]
        for nb_name in dict.fromkeys(k[0] for k in columns):
            graded = course / "autograded" / student / assignment / f"{nb_name}.ipynb"
            cells = {}
            if graded.exists():
                cells = {
                    c.metadata["nbgrader"]["grade_id"]: c
                    for c in nbformat.read(graded, as_version=4).cells
                    if c.metadata.get("nbgrader", {}).get("grade")
                }
            lines.append(f"## {nb_name}")
            for key in (k for k in columns if k[0] == nb_name):
                why = explain(cells[key[1]], timeout) if key[1] in cells else "notebook not submitted"
                lines_of.setdefault(student, {})[key] = why
                lines.append(
                    f"- **{key[1].removeprefix('test_')}**: {fmt(scores[key])} / {fmt(maxima[key])}. {why}"
                )
            lines.append("")
        if notes[student]:
            lines += ["## Notes for the instructor"] + [f"- {n}" for n in notes[student]] + [""]
        (out / "feedback" / f"{student}.md").write_text("\n".join(lines), encoding="utf-8")
    write_class_report(out, columns, maxima, rows, lines_of, notes, labels=[column(*k) for k in columns])
    return (
        [[s] + [scores[k] for k in columns] + [sum(scores.values())] for s, scores in rows],
        header,
        total_max,
    )
