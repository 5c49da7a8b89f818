"""The class report: ``class.md`` and ``class.png`` from one grading of a whole class.

Per exercise the pass rate, the most frequent failure reasons with their counts (the check's own
words: the first input that differed and what differed, and the misconception its hint names), the
students with a timeout or a broken file, and a students x exercises grid (markdown and PNG).
Written by :func:`lmcore.course.build.grade_report.write_report` next to ``grades.csv``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

__all__ = ["STATUSES", "status_of", "failure_reason", "class_summary", "write_class_report"]

# status -> (grid symbol, meaning, PNG colour). The colours are Okabe and Ito's, told apart with
# every common colour-vision deficiency (blue for passed, vermilion for failed), and each PNG cell
# also carries its symbol (_PNG_SYMBOL where the font has no glyph), so no colour is needed.
STATUSES = {
    "pass": ("✓", "passed", "#56B4E9"),
    "fail": ("✗", "a check failed", "#D55E00"),
    "todo": ("…", "not attempted", "#DDDDDD"),
    "timeout": ("⏱", "stopped at the cell time limit", "#F0E442"),
    "error": ("!", "the test cell raised an error", "#CC79A7"),
    "missing": ("—", "notebook not submitted or unreadable", "#ffffff"),
}
_PNG_SYMBOL = {"timeout": "T"}
_CHECK = re.compile(r"^[✓✗…] (?:pass|fail|not attempted yet) ([^:]+): (.*)$")


def status_of(score: float, max_score: float, line: str) -> str:
    """One of :data:`STATUSES` for a graded cell, from its points and its feedback line."""
    if score >= max_score:
        return "pass"
    if line == "notebook not submitted":
        return "missing"
    if line.startswith("stopped after the"):
        return "timeout"
    if "not attempted yet" in line:
        return "todo"
    if line.startswith("✗"):
        return "fail"
    return "error"


def failure_reason(line: str, limit: int = 110) -> str:
    """A failure line without the mark and the check's name: what differed, then the hint's
    misconception in brackets, cut to ``limit`` characters."""
    at = line.find("✗ ")
    first = re.split(r" (?=[✓✗…] )", line[at:])[0] if at >= 0 else line
    m = _CHECK.match(first)
    text = m.group(2) if m else first
    what, _, hint = text.partition(" Hint: ")
    what = what.rstrip(".")
    if len(what) > limit:
        what = what[: limit - 1] + "…"
    if hint:
        hint = hint.rstrip(".")
        hint = hint if len(hint) <= limit else hint[: limit - 1] + "…"
        return f"{what} (hint: {hint})"
    return what


def class_summary(columns, maxima, rows, lines) -> dict:
    """``columns``: exercise keys in order; ``rows``: [(student, {key: score})];
    ``lines``: {student: {key: feedback line}}. Returns per-exercise counts and reasons, the
    status grid and the students with a timeout or a missing/broken notebook."""
    students = [s for s, _ in rows]
    grid = {
        s: {k: status_of(scores[k], maxima[k], lines[s].get(k, "notebook not submitted")) for k in columns}
        for s, scores in rows
    }
    per = {}
    for k in columns:
        statuses = Counter(grid[s][k] for s in students)
        reasons = Counter(
            failure_reason(lines[s][k]) for s in students if grid[s][k] in ("fail", "error", "timeout")
        )
        per[k] = {"statuses": statuses, "passed": statuses["pass"], "reasons": reasons.most_common()}
    trouble = {
        s: [k for k in columns if grid[s][k] in ("timeout", "missing")]
        for s in students
        if any(grid[s][k] in ("timeout", "missing") for k in columns)
    }
    return {"students": students, "grid": grid, "per_exercise": per, "trouble": trouble}


def _grid_png(path: Path, labels, students, grid) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    order = list(STATUSES)
    values = [[order.index(grid[s][k]) for k in grid[s]] for s in students]
    fig, ax = plt.subplots(
        figsize=(max(4.0, 0.35 * len(labels) + 2.5), max(2.0, 0.3 * len(students) + 1.8)), dpi=100
    )
    cmap = ListedColormap([STATUSES[x][2] for x in order])
    ax.imshow(values, cmap=cmap, vmin=-0.5, vmax=len(order) - 0.5, aspect="auto")
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    totals = [sum(grid[s][k] == "pass" for k in grid[s]) for s in students]
    ax.set_yticks(
        range(len(students)), [f"{s} ({t}/{len(labels)})" for s, t in zip(students, totals)], fontsize=7
    )
    for y, s in enumerate(students):
        for x, k in enumerate(grid[s]):
            mark = _PNG_SYMBOL.get(grid[s][k], STATUSES[grid[s][k]][0])
            ax.text(x, y, mark, ha="center", va="center", fontsize=6, color="black")
    ax.set_xticks([x - 0.5 for x in range(1, len(labels))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(students))], minor=True)
    ax.grid(which="minor", color="#757575", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.legend(
        handles=[
            Patch(
                facecolor=STATUSES[x][2],
                edgecolor="#757575",
                label=f"{_PNG_SYMBOL.get(x, STATUSES[x][0])} {STATUSES[x][1]}",
            )
            for x in order
        ],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=7,
        frameon=False,
    )
    ax.set_title("students x exercises (passed / exercises after each name)", fontsize=9)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def write_class_report(out, columns, maxima, rows, lines, notes, labels=None, top: int = 3) -> dict:
    """Write ``out/class.md`` and ``out/class.png``; returns :func:`class_summary`'s dict."""
    out = Path(out)
    labels = labels or [str(k) for k in columns]
    summary = class_summary(columns, maxima, rows, lines)
    n = len(summary["students"])
    total_max = sum(maxima[k] for k in columns)
    totals = sorted(sum(scores[k] for k in columns) for _, scores in rows)
    fmt = lambda x: f"{x:g}"  # noqa: E731
    md = [
        f"# Class report: {n} student{'s' * (n != 1)}, {len(columns)} exercise{'s' * (len(columns) != 1)}",
        "",
        f"Totals out of {fmt(total_max)}: median {fmt(totals[n // 2]) if n else '-'}, "
        f"lowest {fmt(totals[0]) if n else '-'}, highest {fmt(totals[-1]) if n else '-'}. "
        "The grid as a picture: `class.png`.",
        "",
        "## Per exercise",
        "",
        "| exercise | passed | not attempted | most frequent failure reasons (students) |",
        "|---|---:|---:|---|",
    ]
    for k, label in zip(columns, labels):
        p = summary["per_exercise"][k]
        share = f"{p['passed']} / {n} ({p['passed'] / n:.0%})" if n else "0 / 0"
        reasons = "; ".join(f"{c}× {r}".replace("|", "\\|") for r, c in p["reasons"][:top]) or "-"
        md.append(f"| {label} | {share} | {p['statuses']['todo']} | {reasons} |")
    md += ["", "## Timeouts and broken or missing files", ""]
    if not summary["trouble"]:
        md.append("None.")
    for s, keys in summary["trouble"].items():
        grid = summary["grid"][s]
        said = [f"{labels[columns.index(k)]}: {lines[s][k]}" for k in keys if grid[k] == "timeout"]
        missing = [labels[columns.index(k)] for k in keys if grid[k] == "missing"]
        if missing:
            said.append("not graded (notebook not submitted or unreadable): " + ", ".join(missing))
        said += [x for x in notes.get(s, []) if "readable" in x]
        md.append(f"- **{s}**: " + "; ".join(said))
    md += ["", "## Students x exercises", ""]
    md.append(" ".join(f"{v[0]} {v[1]}," for v in STATUSES.values()).rstrip(",") + ".")
    md += ["", "| student | " + " | ".join(labels) + " | total |", "|---|" + "---|" * len(labels) + "---:|"]
    for s, scores in rows:
        cells = " | ".join(STATUSES[summary["grid"][s][k]][0] for k in columns)
        md.append(f"| {s} | {cells} | {fmt(sum(scores[k] for k in columns))} |")
    out.mkdir(parents=True, exist_ok=True)
    (out / "class.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    _grid_png(out / "class.png", labels, summary["students"], summary["grid"])
    return summary
