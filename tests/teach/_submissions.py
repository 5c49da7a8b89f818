"""Generated submissions for the grading tests: a release made by nbgrader, answers filled in."""

from __future__ import annotations

import shutil
from pathlib import Path

from lmcore.course.build.student import STUB

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def release(course_dir, names, timeout=20) -> Path:
    """Run ``nbgrader generate_assignment`` on stamped copies; returns the release folder."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from lmcore.course.build.grade import ASSIGNMENT, nbgrader_config, prepare_course

    shutil.rmtree(course_dir, ignore_errors=True)
    prepare_course(course_dir, names, NOTEBOOKS)
    config = nbgrader_config(course_dir, timeout)
    result = NbGraderAPI(CourseDirectory(config=config), config=config).generate_assignment(ASSIGNMENT)
    assert result["success"], result.get("log")
    return Path(course_dir) / "release" / ASSIGNMENT


def reference_body(source_nb, function: str) -> list[str]:
    """The lines between the solution markers of ``function`` in the source notebook."""
    for cell in source_nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == function:
            lines = cell.source.splitlines()
            begin = next(i for i, s in enumerate(lines) if "### BEGIN SOLUTION" in s)
            end = next(i for i, s in enumerate(lines) if "### END SOLUTION" in s)
            return lines[begin + 1 : end]
    raise KeyError(function)


def answer(nb, function: str, body: list[str], after: str = "") -> None:
    """Replace the stub of ``function`` in a released notebook by ``body`` (+ top-level ``after``)."""
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == function:
            assert STUB in cell.source, f"no stub for {function}"
            lines = []
            for line in cell.source.splitlines():
                if line.strip() == STUB:
                    lines += body
                else:
                    lines.append(line)
            cell.source = "\n".join(lines) + (f"\n\n{after}" if after else "")
            return
    raise KeyError(function)


def edit_test_cell(nb, grade_id: str, source: str) -> None:
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = source
            return
    raise KeyError(grade_id)


def solution_ids(source_nb) -> list[str]:
    """The grade ids (function names) of the solution cells of a stamped notebook."""
    return [
        c.metadata["nbgrader"]["grade_id"]
        for c in source_nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    ]


def points(source_nb) -> float:
    """The points a stamped notebook's autograded test cells are worth together."""
    return sum(
        c.metadata["nbgrader"].get("points", 0)
        for c in source_nb.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    )


def answer_all(nb, source_nb) -> None:
    """Answer every exercise of a released notebook with the source notebook's reference."""
    for grade_id in solution_ids(source_nb):
        answer(nb, grade_id, reference_body(source_nb, grade_id))
