"""Build the student edition: solutions replaced by stubs, outputs cleared.

Code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (nbgrader's markers) becomes
``raise NotImplementedError(...)`` at the indentation of the BEGIN line. Solutions live inside
function bodies, so the stub only fires when a check calls the function, and "Run All" reaches
the end. Usage: ``python -m lmcore.course.build.student notebooks student``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

__all__ = ["BEGIN", "END", "STUB", "strip_solutions", "student_notebook", "build_student_edition"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("Exercise: write your solution here, then run the check below.")'
_BEGIN_RE = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")


def strip_solutions(source: str, where: str = "cell") -> str:
    """Replace every solution block in ``source`` by a stub; errors on unbalanced markers."""
    out, indent, lines = [], None, source.splitlines()
    for n, line in enumerate(lines, 1):
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


def student_notebook(nb):
    """A copy of ``nb`` with solutions stubbed, outputs, execution counts and widget state cleared."""
    nb = nbformat.from_dict(nb)
    nb = nbformat.from_dict(nbformat.v4.upgrade(nb) if nb.nbformat < 4 else nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.source = strip_solutions(cell.source, where=f"cell {i}")
        cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    return nb


def build_student_edition(src_dir="notebooks", out_dir="student") -> list[Path]:
    """Write the student edition of every ``*.ipynb`` in ``src_dir`` to ``out_dir``."""
    src, out = Path(src_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(src.glob("*.ipynb")):
        nb = student_notebook(nbformat.read(path, as_version=4))
        target = out / path.name
        nbformat.write(nb, target)
        written.append(target)
    return written


if __name__ == "__main__":
    args = sys.argv[1:] or ["notebooks", "student"]
    paths = build_student_edition(*args)
    print(f"wrote {len(paths)} student notebooks to {args[1] if len(args) > 1 else 'student'}/")
