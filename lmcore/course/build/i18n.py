"""The course in other languages: translations that cannot go stale silently.

For each notebook ``notebooks/NN_name.ipynb`` a language keeps one text file,
``LANG/translations/NN_name.txt``: per markdown cell, in the notebook's order, the English text it
translates (its sha256 on the cell's header line) and the translation::

    === cell f83437f6 sha256 1a2b3c4d5e6f7a8b ===
    --- en ---
    ### Exercise 2 · ...
    --- zh ---
    ### 练习 2 · ...

``LANG/notebooks/NN_name.ipynb`` is generated from the two (:func:`generate`): the English
notebook with each markdown cell's text replaced by its translation, code cells and their outputs
untouched, so the numbers a reader sees are the ones nbval verifies in the English edition.

:func:`drift` names every markdown cell whose English changed since it was translated (with a
diff of the English), every cell not translated yet, every translation of a cell that no longer
exists, and a header whose hash does not match the English it holds. The tests fail on any of
them, and on a committed notebook that differs from a fresh generation.

    lmcore-course translate [--lang zh] [--check] [--update] [--revised CELL ...] [NN_* ...]

writes the generated notebooks (refusing while anything drifts), ``--check`` only reports, and
``--update`` adds a block for each untranslated cell (the English filled in, the translation
empty) without touching a translated one, stale or not: a stale block keeps the old English until
a translator revises it, so that its diff stays visible. ``--revised CELL`` (with one notebook
pattern) is the step after that revision: the block records the English as it is now, and its hash.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .paths import REPO

__all__ = [
    "LANGUAGES",
    "Block",
    "Problem",
    "english_hash",
    "parse",
    "render",
    "translations_path",
    "edition_path",
    "load",
    "drift",
    "join_cjk_lines",
    "generate",
    "updated",
    "revised",
    "main",
]

LANGUAGES = {"zh": "中文"}  # language code -> its name, in itself

_HEADER = re.compile(r"^=== cell (\S+) sha256 ([0-9a-f]{16}) ===$")
_EN, _TRANSLATION = "--- en ---", "--- {lang} ---"
_INTRO = (
    "# lmcore translation of {source} into {lang} ({language}).\n"
    "# One block per markdown cell: the English it translates (its sha256 on the header line), then\n"
    "# the translation. Edit the translation only; `lmcore-course translate --lang {lang} --check`\n"
    "# names any cell whose English changed since, with a diff.\n"
)


@dataclass
class Block:
    """One markdown cell's translation: the cell id, the hash recorded on its header, the English
    it translates and the translation ('' while none is written)."""

    cell: str
    sha: str
    en: str
    text: str


@dataclass
class Problem:
    """What :func:`drift` found in one cell: ``kind`` is ``stale``, ``untranslated``, ``orphan``
    or ``hash``; ``detail`` says what changed (a diff of the English, for ``stale``)."""

    notebook: str
    cell: str
    kind: str
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.notebook}: cell {self.cell}: {self.kind}"
        return f"{text}\n{self.detail}" if self.detail else text


def english_hash(text: str) -> str:
    """The first 16 hex digits of the sha256 of a markdown cell's text (trailing newlines dropped)."""
    return hashlib.sha256(text.rstrip("\n").encode("utf-8")).hexdigest()[:16]


def _require_lang(lang) -> str:
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {sorted(LANGUAGES)}; got {lang!r}.")
    return lang


def parse(text: str, lang: str) -> list[Block]:
    """The blocks of a translation file (the comment lines before the first block are skipped):
    each block's English exactly as :func:`render` wrote it, its translation with the blank lines
    that separate blocks dropped."""
    _require_lang(lang)
    marker = _TRANSLATION.format(lang=lang)
    blocks, lines = [], text.split("\n")
    starts = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    for k, start in enumerate(starts):
        cell, sha = _HEADER.match(lines[start]).groups()
        body = lines[start + 1 : starts[k + 1] if k + 1 < len(starts) else len(lines)]
        if not body or body[0] != _EN or marker not in body:
            raise ValueError(
                f"the block of cell {cell} must start with {_EN!r} and hold a {marker!r} line "
                f"(line {start + 1})."
            )
        split = body.index(marker)
        en = "\n".join(body[1:split])  # exactly as rendered: render() writes it unchanged
        translated = "\n".join(body[split + 1 :]).rstrip("\n")
        blocks.append(Block(cell, sha, en, translated))
    return blocks


def render(blocks: list[Block], lang: str, name: str) -> str:
    """The text of a translation file holding ``blocks`` (the inverse of :func:`parse`)."""
    marker = _TRANSLATION.format(lang=_require_lang(lang))
    source = "README.md" if name == "README" else f"notebooks/{name}.ipynb"
    out = [_INTRO.format(source=source, lang=lang, language=LANGUAGES[lang])]
    for b in blocks:
        out.append(f"=== cell {b.cell} sha256 {b.sha} ===\n{_EN}\n{b.en}\n{marker}\n{b.text}\n")
    return "\n".join(out)


# The README's sections a learner reads (README.md's learner copy is the English of these):
# translated as blocks like a notebook's cells, their id the title's slug, into LANG/README.md.
README_SECTIONS = (
    "Start here as a learner",
    "What you will be able to do",
    "Course map",
    "How exercises and the student edition work",
    "Troubleshooting",
)
# The translated README: its title, then the opening paragraph's translation, then this note,
# then the sections.
_README_HEAD = {
    "zh": (
        "# lmcore · 因果语言模型如何把文本变成训练信号（中文版）",
        "这是课程 README 中面向学习者的部分的译文，由 `lmcore-course translate --lang zh` 从英文版生成；"
        "其余部分（教师、测试、结果、在你自己的代码里使用 lmcore……）只有英文，见仓库根目录的 README.md。",
    ),
}
README_OPENING = "opening"  # the block id of the README's opening paragraph (under its title)


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def translations_path(notebook: Path, lang: str, root: Path = REPO) -> Path:
    return Path(root) / _require_lang(lang) / "translations" / f"{Path(notebook).stem}.txt"


def edition_path(notebook: Path, lang: str, root: Path = REPO) -> Path:
    if Path(notebook).suffix == ".md":
        return Path(root) / _require_lang(lang) / Path(notebook).name
    return Path(root) / _require_lang(lang) / "notebooks" / Path(notebook).name


def _markdown(notebook: Path) -> list[tuple[str, str]]:
    """(id, English text) of every unit a translation covers: a notebook's markdown cells, or the
    README's opening paragraph (the one under its title) and its :data:`README_SECTIONS` (each
    from its ``## `` heading to the next)."""
    text = Path(notebook).read_text(encoding="utf-8")
    if Path(notebook).suffix == ".md":
        title = re.search(r"^# .*\n+", text, flags=re.M)
        if title is None:
            raise ValueError(f"{Path(notebook).name} has no '# title' line")
        units = [(README_OPENING, text[title.end() :].split("\n\n", 1)[0].rstrip("\n"))]
        for title in README_SECTIONS:
            m = re.search(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", text, flags=re.M | re.S)
            if m is None:
                raise ValueError(f"{Path(notebook).name} has no '## {title}' section")
            units.append((_slug(title), m.group(0).rstrip("\n")))
        return units
    nb = json.loads(text)
    return [(c["id"], "".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown"]


def load(notebook: Path, lang: str, root: Path = REPO) -> list[Block]:
    """The blocks of ``notebook``'s translation file; [] when it has none yet."""
    path = translations_path(notebook, lang, root)
    return parse(path.read_text(encoding="utf-8"), lang) if path.is_file() else []


def _diff(old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), "translated from", "English now", lineterm=""
    )
    return "\n".join("    " + line for line in lines)


def drift(notebook: Path, lang: str, root: Path = REPO) -> list[Problem]:
    """Every way ``notebook``'s translation differs from its English markdown cells."""
    name = Path(notebook).name
    blocks = {b.cell: b for b in load(notebook, lang, root)}
    problems = []
    english = _markdown(notebook)
    for cell, text in english:
        b = blocks.get(cell)
        if b is None or not b.text.strip():
            problems.append(Problem(name, cell, "untranslated"))
        elif english_hash(b.en) != b.sha:
            problems.append(
                Problem(name, cell, "hash", "the header's sha256 is not the English the block holds")
            )
        elif b.sha != english_hash(text):
            problems.append(Problem(name, cell, "stale", _diff(b.en, text.rstrip("\n"))))
    ids = {cell for cell, _ in english}
    problems += [
        Problem(name, cell, "orphan", "no markdown cell has this id") for cell in blocks if cell not in ids
    ]
    return problems


_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")  # CJK characters and punctuation
_BLOCK_START = re.compile(r"\s*([-*+>|#]|\d+[.)]\s|\$\$)")  # a list item, quote, table row, heading, math


def join_cjk_lines(text: str) -> str:
    """The translation as Markdown should render it: a line break between two CJK characters
    inside a paragraph joined (Markdown turns a soft break into a space, which Chinese text does
    not have between its characters); code blocks, lines that open a list item, a quote, a
    table row, a heading or display math, and the line after a heading or a table row, kept as
    they are."""
    out, fenced = [], False
    for line in text.split("\n"):
        starts_fence = line.lstrip().startswith("```")
        prev = out[-1] if out else ""
        if (
            not fenced
            and not starts_fence
            and prev
            and line
            and not re.match(r"\s*[#|]", prev)  # a heading or a table row ends at its line
            and _CJK.match(prev[-1])
            and _CJK.match(line.lstrip()[:1] or " ")
            and not _BLOCK_START.match(line)
        ):
            out[-1] = prev + line.lstrip()
        else:
            out.append(line)
        if starts_fence:
            fenced = not fenced
    return "\n".join(out)


def generate(notebook: Path, lang: str, root: Path = REPO) -> str:
    """The translated notebook's JSON: ``notebook`` with each markdown cell's text replaced by
    its translation (:func:`join_cjk_lines`) and the notebook's language set. Raises ValueError
    while anything drifts."""
    problems = drift(notebook, lang, root)
    if problems:
        raise ValueError(
            f"{len(problems)} cell(s) of {Path(notebook).name} drift:\n" + "\n".join(map(str, problems))
        )
    texts = {b.cell: b.text for b in load(notebook, lang, root)}
    if Path(notebook).suffix == ".md":  # the README's learner sections, in order, under a header
        heading, note = _README_HEAD[lang]
        opening, *sections = [join_cjk_lines(texts[cell]) for cell, _ in _markdown(notebook)]
        parts = [heading, opening, note, *sections]
        return "\n\n".join(p.strip("\n") for p in parts) + "\n"
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            c["source"] = join_cjk_lines(texts[c["id"]]).splitlines(keepends=True)
    nb["metadata"]["language"] = lang
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def revised(notebook: Path, lang: str, cells, root: Path = REPO) -> str:
    """The translation file with the blocks of ``cells`` taking the English as it is now (its text
    and hash): the step after their translations were revised to match it. Their translations
    are kept as they are. Raises ValueError for a cell that has no block or no markdown."""
    blocks = load(notebook, lang, root)
    english = dict(_markdown(notebook))
    known = {b.cell for b in blocks}
    missing = [c for c in cells if c not in known or c not in english]
    if missing:
        raise ValueError(f"{Path(notebook).name}: no translated markdown cell {', '.join(missing)}")
    for b in blocks:
        if b.cell in cells:
            b.en = english[b.cell].rstrip("\n")
            b.sha = english_hash(b.en)
    return render(blocks, lang, Path(notebook).stem)


def updated(notebook: Path, lang: str, root: Path = REPO) -> str:
    """The translation file with a block for every markdown cell, in the notebook's order: the
    existing blocks kept as they are (stale ones too), an empty one for each untranslated cell,
    orphans dropped."""
    blocks = {b.cell: b for b in load(notebook, lang, root)}
    out = [
        blocks.get(cell) or Block(cell, english_hash(text), text.rstrip("\n"), "")
        for cell, text in _markdown(notebook)
    ]
    return render(out, lang, Path(notebook).stem)


def _notebooks(root: Path, patterns) -> list[Path]:
    """The notebooks the patterns name (all by default), and the README by default or when a
    pattern is ``README``."""
    patterns = list(patterns or ["*", "README"])
    found = sorted({p for pat in patterns for p in (Path(root) / "notebooks").glob(f"{pat}.ipynb")})
    found += [Path(root) / "README.md"] if "README" in patterns else []
    if not found:
        raise FileNotFoundError(f"no notebook matches {patterns} in {Path(root) / 'notebooks'}")
    return found


def main(argv=None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description="Generate or check the course's translated notebooks (LANG/notebooks/)."
    )
    parser.add_argument("notebooks", nargs="*", help='name patterns, e.g. "03_*" (default: every notebook)')
    parser.add_argument("--lang", default="zh", choices=sorted(LANGUAGES))
    parser.add_argument(
        "--check", action="store_true", help="report drift and stale generated notebooks; write nothing"
    )
    parser.add_argument("--update", action="store_true", help="add an empty block for each untranslated cell")
    parser.add_argument(
        "--revised",
        action="append",
        metavar="CELL",
        help="after revising this cell's translation to its new English: record that English and its hash "
        "(repeatable; one notebook pattern, or README)",
    )
    args = parser.parse_args(argv)
    if args.revised:
        try:
            found = _notebooks(REPO, args.notebooks) if args.notebooks else []
        except FileNotFoundError as err:
            parser.error(str(err))
        if len(found) != 1:
            parser.error(
                "--revised needs exactly one notebook pattern (or README) naming the cells' notebook"
            )
        try:
            text = revised(found[0], args.lang, args.revised)
        except ValueError as err:
            parser.error(str(err))
        translations_path(found[0], args.lang).write_text(text, encoding="utf-8", newline="\n")
        print(f"{found[0].name}: {len(args.revised)} block(s) now carry their English as it is")
    failed = 0
    for nb in _notebooks(REPO, args.notebooks):
        if not args.update and not translations_path(nb, args.lang).is_file():
            print(f"{nb.name}: no {args.lang} translation yet (--update starts one)")
            continue
        if args.update:
            path = translations_path(nb, args.lang)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(updated(nb, args.lang), encoding="utf-8", newline="\n")
        problems = drift(nb, args.lang)
        for p in problems:
            print(p)
        failed += bool(problems)
        if problems:
            continue
        out, fresh = edition_path(nb, args.lang), generate(nb, args.lang)
        current = out.read_text(encoding="utf-8") if out.is_file() else None
        if args.check:
            if current != fresh:
                print(
                    f"{out.relative_to(REPO)}: differs from a fresh generation (run lmcore-course translate)"
                )
                failed += 1
        elif current != fresh:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(fresh, encoding="utf-8", newline="\n")
            print(f"wrote {out.relative_to(REPO)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
