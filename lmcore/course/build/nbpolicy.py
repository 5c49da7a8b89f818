"""The printing policy, checked on the committed notebooks (a build tool, not teaching support).

- **Ignored cells need a verdict.** A cell whose output nbval ignores (``# NBVAL_IGNORE_OUTPUT``
  or the tag ``nbval-ignore-output``) may show raw measured digits only if a later code cell,
  before the next markdown heading, prints a checked verdict (calls a helper of
  :mod:`lmcore.course.verdict` or a ``check_*`` grader). Exempt: ``interact`` cells, and cells
  tagged ``varies-device`` (device names, timings, throughput) or whose output is a figure only.
- **Prose numbers are printed numbers.** Every decimal number in a markdown cell (``2.77``,
  ``0.5``) must appear in that notebook's outputs after rounding to the digits written, or be
  declared with a reason in the notebook metadata: ``metadata["lmcore"]["prose_numbers"] =
  {"0.02": "the init std, a definition"}``.

``python -m lmcore.course.build.nbpolicy notebooks/*.ipynb`` prints the table the README quotes.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

__all__ = [
    "load",
    "is_ignored",
    "checked_output_count",
    "ignored_cells",
    "unverified_ignored_cells",
    "prose_numbers",
    "output_numbers",
    "unmatched_prose_numbers",
    "report",
]

VERDICT_CALL = re.compile(r"\b(in_range|near|holds|below|above|check_\w+|run_checks)\(")
# after no ASCII letter, digit, _ or dot: a number right after a Chinese character is one too
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+\.\d+(?:\.\d+)*")


def load(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _tags(cell) -> list:
    return cell.get("metadata", {}).get("tags", [])


def is_ignored(cell) -> bool:
    """True when nbval does not compare this code cell's output."""
    first = _src(cell).lstrip().splitlines()[:3]
    return any(line.strip() in ("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP") for line in first) or bool(
        {"nbval-ignore-output", "nbval-skip"} & set(_tags(cell))
    )


def _text_outputs(cell) -> list[str]:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            t = o.get("text", "")
        else:
            t = o.get("data", {}).get("text/plain", "")
        out.append("".join(t) if isinstance(t, list) else t)
    return out


def _merged_outputs(cell) -> int:
    """A cell's outputs as nbval compares them: consecutive prints to one stream count once (how a
    kernel splits them into stream outputs depends on the machine's load)."""
    kinds = [o.get("name") if o.get("output_type") == "stream" else None for o in cell.get("outputs", [])]
    return sum(1 for i, k in enumerate(kinds) if k is None or i == 0 or kinds[i - 1] != k)


def checked_output_count(nb) -> int:
    """Outputs nbval compares: the outputs of code cells that are not ignored."""
    return sum(_merged_outputs(c) for c in nb["cells"] if c["cell_type"] == "code" and not is_ignored(c))


def ignored_cells(nb) -> list[int]:
    return [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and is_ignored(c)]


def _exempt(cell) -> bool:
    src = _src(cell)
    if re.search(r"\binteract(ive)?\(|\.observe\(|widgets\.", src) or "varies-device" in _tags(cell):
        return True
    texts = [t for t in _text_outputs(cell) if t.strip()]
    return all(re.fullmatch(r"<Figure size [^>]*>\s*", t) for t in texts)


def unverified_ignored_cells(nb) -> list[int]:
    """Ignored, non-exempt cells with no verdict cell after them (before the next heading)."""
    cells, bad = nb["cells"], []
    for i in ignored_cells(nb):
        if _exempt(cells[i]):
            continue
        ok = False
        for c in cells[i + 1 :]:
            if c["cell_type"] == "markdown" and _src(c).lstrip().startswith("#"):
                break
            if c["cell_type"] == "code" and not is_ignored(c) and VERDICT_CALL.search(_src(c)):
                ok = True
                break
        if not ok:
            bad.append(i)
    return bad


def _strip_markdown_noise(text: str) -> str:
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"https?://\S+", " ", text)  # bare URLs
    text = re.sub(r"`[^`]*\.(py|ipynb|png|json|txt|cfg|md)`", " ", text)
    return text


def prose_numbers(nb) -> list[tuple[int, str]]:
    """(cell index, number as written) for every decimal number in the markdown cells."""
    found = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "markdown":
            continue
        for m in NUMBER.finditer(_strip_markdown_noise(_src(c))):
            if m.group(0).count(".") == 1:  # 3.11.7 is a version, not a result
                found.append((i, m.group(0)))
    return found


def output_numbers(nb) -> set[str]:
    """Every decimal number printed by a code cell, as printed."""
    nums = set()
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            for t in _text_outputs(c):
                nums.update(m.group(0) for m in NUMBER.finditer(t) if m.group(0).count(".") == 1)
    return nums


def _matches(written: str, printed: set[str]) -> bool:
    decimals = len(written.split(".")[1])
    target = float(written)
    for p in printed:
        try:
            v = float(p)
        except ValueError:
            continue
        if len(p.split(".")[1]) >= decimals and f"{v:.{decimals}f}" == f"{target:.{decimals}f}":
            return True
        # a printed value rounded half-up may differ from Python's round-half-even
        if len(p.split(".")[1]) >= decimals and abs(v - target) <= 0.5 * 10**-decimals + 1e-12:
            return True
    return False


def unmatched_prose_numbers(nb) -> list[tuple[int, str]]:
    """Prose numbers that no output prints and the metadata does not declare."""
    declared = nb.get("metadata", {}).get("lmcore", {}).get("prose_numbers", {})
    printed = output_numbers(nb)
    return [
        (i, s)
        for i, s in prose_numbers(nb)
        if s not in declared and s.lstrip("0") not in declared and not _matches(s, printed)
    ]


def report(paths) -> str:
    rows = [
        "| notebook | outputs checked | ignored cells | ignored without a verdict | prose numbers "
        "(declared) | unmatched |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p in paths:
        nb = load(p)
        declared = nb.get("metadata", {}).get("lmcore", {}).get("prose_numbers", {})
        rows.append(
            f"| {Path(p).stem} | {checked_output_count(nb)} | {len(ignored_cells(nb))} | "
            f"{len(unverified_ignored_cells(nb))} | {len(prose_numbers(nb))} ({len(declared)}) | "
            f"{len(unmatched_prose_numbers(nb))} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(report(sorted(sys.argv[1:]) or sorted(Path("notebooks").glob("*.ipynb"))))
