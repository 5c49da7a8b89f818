"""The learner's workspace: their own copy of the course, refreshed without ever losing their work.

``make lab`` builds ``workspace/`` (git-ignored) from the learner edition on its first run and
refreshes it on every later one; ``make student`` writes ``student/`` the same way. Every file
this module writes is recorded in ``<folder>/.lmcore/manifest.json`` with the SHA-256 of the bytes
written and, for a notebook, the SHA-256 of its cells as (cell type, source) in order (outputs,
execution counts, cell ids and metadata left out), so "the learner changed it" is decided by
content, not by timestamps:

- a file that is missing is written (a new notebook of the course is *added*);
- a file whose bytes are still the ones recorded is the course's own: it is *updated* when the
  course changed;
- a notebook the learner only ran (its bytes differ, its cells' sources are still the recorded
  ones) is the course's own too: when the course changed it is *updated* to the new learner
  edition, outputs cleared, and the command says so; while the course did not change it is left
  as it is, outputs and all;
- any other file (a source edited, a cell added, or never written by this module, or a notebook
  that does not read as one) is *kept* byte for byte; when the course's version differs from the
  one last given to the learner, that version is written *beside* it as
  ``NN_name.course-update-<hash>.ipynb`` (never over an existing file) and the command says so.

A manifest written before the cells were recorded has no ``cells`` map: its notebooks are judged
by their bytes alone until the next write records them.

``--student --no-solutions`` (``make student SOLUTIONS=0``) writes the graded-class edition:
each stub's note offers the hints only, and ``<folder>/.lmcore/edition.json`` says
``{"solutions": false}``, which :func:`lmcore.course.solutions.show_solution` reads (it then
stops after the fuller hint). The default edition's marker says ``{"solutions": true}``.

Every write goes to a temporary file in the same folder, then ``os.replace``: a crash leaves the
old file or the new one, never half of one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..solutions import EDITION
from .paths import course_root
from .student import student_notebook

__all__ = [
    "MANIFEST",
    "EDITION",
    "Action",
    "atomic_write",
    "beside_name",
    "cells_sha",
    "sync_files",
    "learner_files",
    "learner_readme",
    "build_workspace",
    "build_student_edition",
    "report",
    "main",
    "student_main",
]

MANIFEST = ".lmcore/manifest.json"

START_PAGE = """# Your lmcore workspace

This folder is **yours**: the learner edition of the course (solutions replaced by
`raise NotImplementedError`, outputs cleared). Work here; `lmcore-course lab` (`make lab` in a
clone) and `lmcore-course student` never overwrite a notebook you changed. When the course
changes (`git pull` in a clone, `pip install -U "lmcore[course]"` otherwise), `lmcore-course lab` adds
new notebooks, updates the ones you never touched or only ran (a notebook you only ran comes back
with its outputs cleared: run it again), and puts a newer version of one whose code or text you
changed *beside* it (`NN_name.course-update-<hash>.ipynb`), saying so.

Start with [notebooks/00_start_here.ipynb](notebooks/00_start_here.ipynb).

{table}

- **Stuck on an exercise?** In a cell: `from lmcore.course.solutions import show_solution`, then
  `show_solution("surprise")` (the exercise's function name): the first call gives a nudge, the
  second a fuller hint, the third the reference solution.
- **How far am I?** `lmcore-course progress` (in a terminal, in this folder; `make progress` in
  the repository) runs every check of this workspace and prints a table; it changes nothing here.
- **Something does not work?** `lmcore-course doctor` checks this machine for the course, one
  line per item with its fix.
- The course's own README is [README.md](README.md).
"""

START_PAGE_ZH = """# 你的 lmcore 工作区

这个文件夹**属于你**：课程的学习者版（参考答案换成了 `raise NotImplementedError`，输出已清空）。
请在这里学习；`lmcore-course lab --lang zh`（在克隆的仓库里是 `make lab LANG=zh`）和
`lmcore-course student` 从不覆盖你改过的 notebook。课程更新时（克隆的仓库里 `git pull`，否则
`pip install -U "lmcore[course]"`），`lmcore-course lab --lang zh` 会加入新的 notebook，更新你从未
改过或只运行过的 notebook（只运行过的会清空输出后回来：再运行一遍即可），而你改过代码或文字的
notebook 保持原样，它的新版本写在**旁边**（`NN_name.course-update-<hash>.ipynb`），并会告诉你。

从 [notebooks/00_start_here.ipynb](notebooks/00_start_here.ipynb) 开始。

{table}

- **练习卡住了？** 在一个单元格里运行 `from lmcore.course.solutions import show_solution`，再运行
  `show_solution("surprise")`（练习要求写的函数名）：第一次给一个提示，第二次给更完整的提示，
  第三次给出参考答案。
- **进度如何？** 在终端里、在这个文件夹中运行 `lmcore-course progress`（在仓库里是 `make progress`）：
  它运行本工作区的每个检查并打印一张表，不改动任何文件。
- **有东西不工作？** `lmcore-course doctor` 逐项检查这台机器是否适合本课程，每项附带修复方法。
- 中文版 notebook 的文字是译文；代码、输出以及检查和提示的信息与英文版相同（英文）。
- 课程 README 中面向学习者的部分见 [README.md](README.md)；完整的英文 README 是
  [README.en.md](README.en.md)。
"""

LANGUAGES = ("en", "zh")  # the editions a workspace can hold: the English notebooks, or zh/notebooks/


@dataclass(frozen=True)
class Action:
    """What a sync did with one file: ``added``, ``updated``, ``unchanged``, ``kept`` (the
    learner's version, the course's is the same as before) or ``beside`` (kept; the course's
    newer version written as ``beside``). ``ran``: an update of a notebook the learner had only
    run (its cells' sources as written, its outputs now cleared)."""

    path: str
    what: str
    beside: str | None = None
    ran: bool = False


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# Windows refuses to replace a file another program holds open (an editor, a virus scanner, the
# search indexer), for a moment; POSIX never does, so there a PermissionError is final.
REPLACE_TRIES = 8 if os.name == "nt" else 1


def _replace(tmp, path) -> None:
    """``os.replace(tmp, path)``, retried with backoff (0.05 s doubling, 6 s in all) where the
    platform refuses it while ``path`` is open (:data:`REPLACE_TRIES`)."""
    for attempt in range(REPLACE_TRIES):
        try:
            os.replace(tmp, path)
            return
        except PermissionError:
            if attempt == REPLACE_TRIES - 1:
                raise
            time.sleep(0.05 * 2**attempt)


def beside_name(rel: str, data: bytes) -> str:
    """Where the course's newer version of a learner-changed file goes: next to it, named by
    the new content's hash (so it never replaces anything, and one version is written once)."""
    p = Path(rel)
    return str(p.with_name(f"{p.stem}.course-update-{_sha(data)[:8]}{p.suffix}"))


def cells_sha(data: bytes) -> str | None:
    """SHA-256 of a notebook's cells as (cell type, source) in order: what the learner wrote, not
    what running it changed (outputs, execution counts, cell ids, metadata). None when ``data``
    does not read as a valid notebook."""
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
        cells = [[cell.cell_type, cell.source] for cell in nb.cells]
    except Exception:  # noqa: BLE001 -- anything unreadable is the learner's, kept as it is
        return None
    return _sha(json.dumps(cells, ensure_ascii=False).encode("utf-8"))


def _load_manifest(folder: Path) -> tuple[dict, dict]:
    """(path -> sha256 of the bytes written, notebook path -> cells_sha of them); a manifest from
    before the cells were recorded gives an empty second map."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}, {}
    if not isinstance(data, dict):
        return {}, {}
    files, cells = data.get("files", {}), data.get("cells", {})
    return (files if isinstance(files, dict) else {}), (cells if isinstance(cells, dict) else {})


def _only_run(rel: str, current: bytes, recorded: str | None) -> bool:
    """Whether the notebook ``current`` differs from what was written only by being run: its
    cells' sources hash to ``recorded`` (None, from an old manifest: never)."""
    return rel.endswith(".ipynb") and recorded is not None and cells_sha(current) == recorded


def _decide(rel: str, data: bytes, path: Path, written: str | None, recorded: str | None) -> str:
    """``added``, ``unchanged``, ``updated``, ``ran`` (updated: the learner had only run it),
    ``kept`` or ``beside`` for the course's ``data`` at ``path`` (see the module docstring)."""
    if not path.is_file():
        return "added"
    current_bytes = path.read_bytes()
    current, new = _sha(current_bytes), _sha(data)
    if current == new:
        return "unchanged"
    if current == written:
        return "updated"
    if written == new:  # the course did not change: a notebook only run keeps its outputs
        return "kept"
    return "ran" if _only_run(rel, current_bytes, recorded) else "beside"


def _write_manifest(folder: Path, files: dict, cells: dict) -> None:
    body = json.dumps(
        {
            "about": "sha256 of each file as lmcore last wrote it; for a notebook also of its cells "
            "as (cell_type, source) in order",
            "files": files,
            "cells": cells,
        },
        indent=1,
    )
    atomic_write(folder / MANIFEST, body.encode() + b"\n")


def sync_files(files: dict, folder, *, dry_run: bool = False) -> list[Action]:
    """Bring ``folder`` up to date with ``files`` (relative path -> bytes) without replacing any
    file the learner changed (see the module docstring). Returns one Action per file."""
    if not isinstance(files, dict):
        raise TypeError(f"files must be a dict of relative path -> bytes, got {type(files).__name__}")
    folder = Path(folder)
    (manifest, cells), actions = _load_manifest(folder), []
    for rel, data in sorted(files.items()):
        if not isinstance(data, bytes) or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"files[{rel!r}]: expected bytes under a relative path inside the folder")
        path = folder / rel
        what = _decide(rel, data, path, manifest.get(rel), cells.get(rel))
        if what == "kept":
            actions.append(Action(rel, "kept"))
            continue
        if what == "beside":
            beside = beside_name(rel, data)
            if not dry_run and not (folder / beside).exists():
                atomic_write(folder / beside, data)
            actions.append(Action(rel, "beside", beside))
            continue
        if what != "unchanged" and not dry_run:
            atomic_write(path, data)
        manifest[rel] = _sha(data)
        if rel.endswith(".ipynb"):
            cells[rel] = cells_sha(data)
        actions.append(Action(rel, "updated", ran=True) if what == "ran" else Action(rel, what))
    if not dry_run and any(a.what in ("added", "updated", "unchanged") for a in actions):
        _write_manifest(folder, manifest, cells)
    return actions


def _notebook_bytes(nb) -> bytes:
    return (nbformat.writes(nb) + "\n").encode("utf-8")


_LEFT_OUT = {  # README sections whose content answers the notebooks' exercises or Predict prompts
    "Results": (
        "## Results\n"
        "The course's measured results (final losses, held-out sums, samples) answer some of the\n"
        "notebooks' Predict prompts, so the learner's copy of this README leaves them out; they are in\n"
        "the course repository's README, to read once you have finished the notebooks.\n\n"
    ),
    "Figures": (
        "## Figures\n"
        "The course's figures show what the notebooks' exercises ask you to work out (the packing\n"
        "masks, the loss floor), so the learner's copy of this README leaves them out; each notebook\n"
        "draws its own after you have tried.\n\n"
    ),
    "Using lmcore in your own code": (
        "## Using lmcore in your own code\n"
        "Its examples call lmcore's loss the way some exercises ask you to work out (the\n"
        "denominator under gradient accumulation), so the learner's copy of this README leaves them\n"
        "out; they are in the course repository's README, to read once you have finished the notebooks.\n\n"
    ),
}


def learner_readme(text: str) -> str:
    """The README as the learner's workspace holds it: its ``## Results`` section (the outcomes
    of the notebooks' runs, which answer Predict prompts), its ``## Figures`` section (the
    pictures of what exercises build) and its API examples (``## Using lmcore in your own code``,
    whose accumulation line states an exercise's denominator), each replaced by a note saying why."""
    for title, note in _LEFT_OUT.items():
        start = text.find(f"\n## {title}\n")
        if start < 0:
            continue
        end = text.find("\n## ", start + 1)
        end = len(text) if end < 0 else end + 1
        text = text[: start + 1] + note + text[end:]
    return text


def notebooks_dir(lang: str = "en") -> Path:
    """The course's notebooks in ``lang``: ``notebooks/`` for English, ``zh/notebooks/`` for the
    Chinese edition (generated by ``lmcore-course translate``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES}; got {lang!r}.")
    return course_root() / ("notebooks" if lang == "en" else f"{lang}/notebooks")


def learner_files(
    src_dir=None, *, prefix: str = "notebooks/", extras: bool = True, solutions: bool = True, lang: str = "en"
) -> dict:
    """The learner edition as ``{relative path: bytes}``: every notebook of ``src_dir`` (default:
    the course's notebooks in ``lang``; solutions stubbed, outputs cleared; each stub's note
    offers the hints only when ``solutions`` is False) under ``prefix``; with ``extras``, the
    start page (in ``lang``), the README and the figures it still shows (not the others: they
    picture what exercises build), so that the workspace root reaches what the notebooks link to."""
    src = Path(src_dir) if src_dir is not None else notebooks_dir(lang)
    paths = sorted(src.glob("*.ipynb"))
    if not paths:
        raise ValueError(f"src_dir: no notebooks in {src}")
    files = {
        f"{prefix}{p.name}": _notebook_bytes(
            student_notebook(nbformat.read(p, as_version=4), notes=True, solutions=solutions)
        )
        for p in paths
    }
    if extras:
        repo = course_root() if src_dir is None else src.resolve().parent
        table = "\n".join(f"- [{p.stem}]({prefix}{p.name})" for p in paths)
        start = START_PAGE_ZH if lang == "zh" else START_PAGE
        files["START_HERE.md"] = start.format(table=table).encode("utf-8")
        shown = ""
        if (repo / "README.md").is_file():
            readme = learner_readme((repo / "README.md").read_text("utf-8"))
            files["README.md"], shown = readme.encode("utf-8"), readme
            translated = repo / lang / "README.md"  # the learner sections, translated (i18n)
            if lang != "en" and translated.is_file():
                files["README.en.md"] = files["README.md"]
                files["README.md"] = translated.read_bytes()
                shown += translated.read_text("utf-8")
        for fig in sorted((repo / "figures").glob("*.png")):  # only those the learner's README shows:
            if f"figures/{fig.name}" in shown:  # the others picture what exercises build
                files[f"figures/{fig.name}"] = fig.read_bytes()
    return files


def build_workspace(
    folder="workspace", src_dir=None, *, dry_run: bool = False, lang: str = "en"
) -> list[Action]:
    """Create or refresh the learner's workspace ``folder`` from the notebooks in ``src_dir``
    (default: the course's, in ``lang``)."""
    return sync_files(learner_files(src_dir, lang=lang), folder, dry_run=dry_run)


def build_student_edition(
    src_dir=None, out_dir="student", *, dry_run: bool = False, solutions: bool = True
) -> list[Path]:
    """``make student``: the student edition of every notebook of ``src_dir`` (default: the
    course's ``notebooks/``, a clone's or the installed copy) in ``out_dir``,
    by the same rules (a notebook changed there is kept; prints what it kept), and the marker
    :data:`EDITION` saying whether ``show_solution`` may show the reference solutions there
    (``solutions=False``: the graded-class edition, hints only). Returns the path of every
    notebook of the edition in ``out_dir``."""
    files = learner_files(src_dir, prefix="", extras=False, solutions=solutions)
    actions = sync_files(files, out_dir, dry_run=dry_run)
    if not dry_run:
        marker = {"about": "read by lmcore.course.solutions.show_solution", "solutions": solutions}
        atomic_write(Path(out_dir) / EDITION, json.dumps(marker, indent=1).encode() + b"\n")
    if any(a.what in ("kept", "beside") for a in actions):
        print(report(actions, out_dir))
    return [Path(out_dir) / a.path for a in actions]


def report(actions, folder) -> str:
    """One line per notebook that changed or was kept, then a count; what the learner reads."""
    lines = []
    for a in actions:
        if a.what == "added":
            lines.append(f"  added     {a.path}")
        elif a.what == "updated" and a.ran:
            lines.append(f"  updated   {a.path} (you had only run it; outputs cleared)")
        elif a.what == "updated":
            lines.append(f"  updated   {a.path} (you had not changed it)")
        elif a.what == "beside":
            lines.append(
                f"  kept      {a.path}: you changed it; the course's newer version is beside it: {a.beside}"
            )
    kept = sum(a.what in ("kept", "beside") for a in actions)
    counts = {w: sum(a.what == w for a in actions) for w in ("added", "updated", "unchanged")}
    lines.append(
        f"{folder}/: {counts['added']} added, {counts['updated']} updated, {counts['unchanged']} unchanged, "
        f"{kept} of yours kept as you left them"
    )
    return "\n".join(lines)


def _write_student(folder, src, *, dry_run: bool, solutions: bool) -> None:
    paths = build_student_edition(src, folder, dry_run=dry_run, solutions=solutions)
    kind = "student edition" if solutions else "graded-class edition (no reference solutions)"
    print(f"{kind}: {len(paths)} notebooks in {folder}/")


def main(argv=None, prog: str | None = None) -> int:
    """``python -m lmcore.course.build.workspace [FOLDER]``: create or refresh a workspace;
    ``--student`` writes the flat student edition instead (as ``lmcore-course student`` does)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Create or refresh the learner's workspace (or student/)."
    )
    parser.add_argument("folder", nargs="?", default="workspace")
    parser.add_argument(
        "--src", default=None, help="the instructor edition (default: the course's notebooks/)"
    )
    parser.add_argument("--student", action="store_true", help="the flat student edition (make student)")
    parser.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    parser.add_argument(
        "--no-solutions",
        action="store_true",
        help="with --student: the graded-class edition (hints only, show_solution shows no solution)",
    )
    args = parser.parse_args(argv)
    if args.no_solutions and not args.student:
        parser.error("--no-solutions goes with --student (the edition handed out to a graded class)")
    if args.student:
        _write_student(args.folder, args.src, dry_run=args.dry_run, solutions=not args.no_solutions)
    else:
        print(report(build_workspace(args.folder, args.src, dry_run=args.dry_run), args.folder))
    return 0


def student_main(argv=None, prog: str | None = None) -> int:
    """``lmcore-course student [DIR] [--no-solutions]``: the student edition in DIR (default student/)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Write the student edition handed out to a class."
    )
    parser.add_argument("folder", nargs="?", default="student")
    parser.add_argument(
        "--src", default=None, help="the instructor edition (default: the course's notebooks/)"
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    parser.add_argument("--no-solutions", action="store_true", help="the graded-class edition (hints only)")
    args = parser.parse_args(argv)
    _write_student(args.folder, args.src, dry_run=args.dry_run, solutions=not args.no_solutions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
