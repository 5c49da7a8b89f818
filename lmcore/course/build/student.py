"""The student edition of a notebook: solutions replaced by stubs, outputs cleared.

Code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (nbgrader's markers) becomes
``raise NotImplementedError(...)`` at the indentation of the BEGIN line. Solutions live inside
function bodies, so the stub only fires when a check calls the function, and "Run All" reaches
the end. ``make student`` writes the edition with
:func:`lmcore.course.build.workspace.build_student_edition` (which never replaces a notebook
someone changed). The graded-class edition (``make student SOLUTIONS=0``, ``solutions=False``)
puts :data:`NOTE_HINTS_ONLY` above each stub instead of :data:`NOTE`: hints only, no word of how
to print the reference solution.
"""

from __future__ import annotations

import re

import nbformat

__all__ = [
    "BEGIN",
    "END",
    "STUB",
    "NOTE",
    "NOTE_HINTS_ONLY",
    "strip_solutions",
    "strip_nbval_markers",
    "student_notebook",
]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("Exercise: write your solution here, then run the check below.")'
# Above each stub in the learner's copies (workspace/, student/; not in nbgrader's release).
NOTE = (
    "# Stuck? In a new cell: from lmcore.course.solutions import show_solution\n"
    '#   show_solution("{name}") gives a nudge; each call one step more (hint, then solution).'
)
# The same place in the graded-class edition: the hints, and nothing of the reference solution.
NOTE_HINTS_ONLY = (
    "# Stuck? In a new cell: from lmcore.course.solutions import show_solution\n"
    '#   show_solution("{name}") gives a nudge; a second call the fuller hint (hints only here).'
)
_BEGIN_RE = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
_DEF_RE = re.compile(r"^(\s*)def\s+([A-Za-z_]\w*)\s*\(")


def strip_solutions(source: str, where: str = "cell", *, notes: bool = False, solutions: bool = True) -> str:
    """Replace every solution block in ``source`` by a stub; errors on unbalanced markers. With
    ``notes``, :data:`NOTE` (naming the enclosing function) goes above each stub, or
    :data:`NOTE_HINTS_ONLY` when ``solutions`` is False (the graded-class edition)."""
    out, indent, lines, fn = [], None, source.splitlines(), None
    note_text = NOTE if solutions else NOTE_HINTS_ONLY
    for n, line in enumerate(lines, 1):
        d = _DEF_RE.match(line)
        fn = d.group(2) if d and indent is None else fn
        m = _BEGIN_RE.match(line)
        if m:
            if indent is not None:
                raise ValueError(f"{where}, line {n}: nested {BEGIN}")
            indent = m.group(1)
            if not indent:
                raise ValueError(
                    f"{where}, line {n}: {BEGIN} at top level; put the solution "
                    "inside a function body so the stub does not stop Run All"
                )
            if notes and fn:
                out += [indent + note for note in note_text.format(name=fn).splitlines()]
            out.append(indent + STUB)
        elif line.strip() == END:
            if indent is None:
                raise ValueError(f"{where}, line {n}: {END} without {BEGIN}")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise ValueError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


# A line that is only an nbval marker (``# NBVAL_IGNORE_OUTPUT``, ``# NBVAL_SKIP``, ...).
_NBVAL_MARKER = re.compile(r"^[ \t]*# NBVAL_[A-Z_]+[ \t]*(?:\n|$)", re.M)


def strip_nbval_markers(source: str) -> str:
    """``source`` without its lines that are only an nbval marker: nbval runs the instructor
    edition (notebooks/); in the learner's edition, the nbgrader release (the same cells) and
    the site they are noise."""
    return _NBVAL_MARKER.sub("", source)


def student_notebook(nb, *, notes: bool = False, solutions: bool = True):
    """A copy of ``nb`` with solutions stubbed, nbval's markers dropped, outputs, execution counts
    and widget state cleared;
    with ``notes``, each stub says how to ask for a hint and the solution (only for a hint when
    ``solutions`` is False: the graded-class edition)."""
    nb = nbformat.from_dict(nb)
    nb = nbformat.from_dict(nbformat.v4.upgrade(nb) if nb.nbformat < 4 else nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        source = strip_solutions(cell.source, where=f"cell {i}", notes=notes, solutions=solutions)
        cell.source = strip_nbval_markers(source)
        cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    return nb
