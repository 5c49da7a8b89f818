"""The translated editions (lmcore.course.build.i18n): the file format round-trips, every kind
of drift is named (notebook, cell id, what changed), a generated notebook keeps the English
code and outputs, and the committed translations and notebooks are current."""

import json
import shutil
from pathlib import Path

import pytest

from lmcore.course.build import i18n
from lmcore.course.build.paths import REPO

NOTEBOOK = REPO / "notebooks" / "00_start_here.ipynb"


def _fake_repo(tmp_path) -> Path:
    """A copy of notebook 00 in a repository of its own, every markdown cell translated."""
    (tmp_path / "notebooks").mkdir()
    nb = tmp_path / "notebooks" / NOTEBOOK.name
    shutil.copy(NOTEBOOK, nb)
    blocks = i18n.parse(i18n.updated(nb, "zh", tmp_path), "zh")
    for b in blocks:
        b.text = "译文：" + b.en
    path = i18n.translations_path(nb, "zh", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(i18n.render(blocks, "zh", nb.stem), encoding="utf-8")
    return nb


def _edit_markdown(nb: Path, index: int, new: str) -> str:
    data = json.loads(nb.read_text(encoding="utf-8"))
    cells = [c for c in data["cells"] if c["cell_type"] == "markdown"]
    cells[index]["source"] = new.splitlines(keepends=True)
    nb.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return cells[index]["id"]


def test_the_file_format_round_trips_any_markdown():
    tricky = [
        i18n.Block("a1", i18n.english_hash("x"), "x", "甲"),
        i18n.Block(
            "b2", "0" * 16, "\nleading blank line\n\n--- not a marker ---\n```python\nx = 1\n```", "乙\n\n丙"
        ),
        i18n.Block("c3", "1" * 16, "trailing spaces   \n| a | b |\n|---|---|", ""),
    ]
    text = i18n.render(tricky, "zh", "00_x")
    assert i18n.parse(text, "zh") == tricky
    assert i18n.render(i18n.parse(text, "zh"), "zh", "00_x") == text


def test_a_fully_translated_notebook_has_no_drift_and_generates(tmp_path):
    nb = _fake_repo(tmp_path)
    assert i18n.drift(nb, "zh", tmp_path) == []
    out = json.loads(i18n.generate(nb, "zh", tmp_path))
    english = json.loads(nb.read_text(encoding="utf-8"))
    assert out["metadata"]["language"] == "zh"
    for en, zh in zip(english["cells"], out["cells"], strict=True):
        assert en["id"] == zh["id"] and en["cell_type"] == zh["cell_type"]
        if en["cell_type"] == "code":
            assert en == zh  # code and outputs untouched: the numbers nbval checks
        else:
            assert "".join(zh["source"]) == i18n.join_cjk_lines("译文：" + "".join(en["source"]).rstrip("\n"))


def test_a_changed_english_cell_names_notebook_cell_and_the_change(tmp_path):
    nb = _fake_repo(tmp_path)
    cell = _edit_markdown(nb, 1, "A sentence that was not there before.")
    (problem,) = i18n.drift(nb, "zh", tmp_path)
    assert (problem.notebook, problem.cell, problem.kind) == (nb.name, cell, "stale")
    assert "+A sentence that was not there before." in problem.detail
    assert nb.name in str(problem) and cell in str(problem)
    with pytest.raises(ValueError, match=cell):
        i18n.generate(nb, "zh", tmp_path)
    # --update leaves the stale block as it was, so its diff stays visible
    assert i18n.parse(i18n.updated(nb, "zh", tmp_path), "zh") == i18n.load(nb, "zh", tmp_path)


def test_untranslated_orphan_and_tampered_cells_are_named(tmp_path):
    nb = _fake_repo(tmp_path)
    path = i18n.translations_path(nb, "zh", tmp_path)
    blocks = i18n.load(nb, "zh", tmp_path)
    blocks[0].text = ""  # not translated yet
    blocks[1].en += " (edited by hand)"  # the header's hash no longer matches
    blocks.append(i18n.Block("gone", i18n.english_hash("old"), "old", "旧"))
    path.write_text(i18n.render(blocks, "zh", nb.stem), encoding="utf-8")
    kinds = {(p.cell, p.kind) for p in i18n.drift(nb, "zh", tmp_path)}
    assert kinds == {(blocks[0].cell, "untranslated"), (blocks[1].cell, "hash"), ("gone", "orphan")}
    updated = i18n.parse(i18n.updated(nb, "zh", tmp_path), "zh")
    assert "gone" not in {b.cell for b in updated} and updated[0].text == ""


def test_a_notebook_with_no_translation_is_untranslated_everywhere(tmp_path):
    (tmp_path / "notebooks").mkdir()
    nb = tmp_path / "notebooks" / NOTEBOOK.name
    shutil.copy(NOTEBOOK, nb)
    problems = i18n.drift(nb, "zh", tmp_path)
    assert problems and {p.kind for p in problems} == {"untranslated"}


def test_line_breaks_between_chinese_characters_are_joined_and_nothing_else():
    text = "第一行的句子，\n接着第二行。\nEnglish line\n中文\n- 列表项\n| 表 | 格 |\n```python\n# 注释\n# 注释二\n```\n中文结尾"
    joined = i18n.join_cjk_lines(text)
    assert joined.startswith("第一行的句子，接着第二行。\nEnglish line\n中文\n- 列表项\n| 表 | 格 |\n")
    assert "# 注释\n# 注释二\n```\n中文结尾" in joined  # code kept; a fence's end is not a CJK character
    assert (
        i18n.join_cjk_lines("## 标题\n正文第一行\n第二行") == "## 标题\n正文第一行第二行"
    )  # a heading stays whole
    assert i18n.join_cjk_lines("| 表 | 格 |\n正文") == "| 表 | 格 |\n正文"


def test_bad_input():
    with pytest.raises(ValueError, match="lang"):
        i18n.parse("", "fr")
    with pytest.raises(ValueError, match="cell x1"):
        i18n.parse("=== cell x1 sha256 0123456789abcdef ===\nno marker\n", "zh")


TRANSLATED = sorted(p for p in (REPO / "zh" / "translations").glob("*.txt"))


@pytest.mark.parametrize("path", TRANSLATED, ids=lambda p: p.stem)
def test_the_committed_translation_is_current_and_its_notebook_generated(path):
    nb = REPO / "README.md" if path.stem == "README" else REPO / "notebooks" / f"{path.stem}.ipynb"
    assert nb.is_file(), f"{path} translates no notebook"
    problems = i18n.drift(nb, "zh")
    assert not problems, "\n".join(map(str, problems))
    committed = i18n.edition_path(nb, "zh")
    assert committed.is_file() and committed.read_text(encoding="utf-8") == i18n.generate(nb, "zh"), (
        f"{committed} is not a fresh generation: run lmcore-course translate --lang zh"
    )


def test_every_chinese_notebook_has_its_translation():
    made = {p.stem for p in (REPO / "zh" / "notebooks").glob("*.ipynb")}
    assert made == {p.stem for p in TRANSLATED} - {"README"}


def test_the_readme_translates_the_learner_sections_and_names_a_changed_one(tmp_path):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (tmp_path / "README.md").write_text(readme, encoding="utf-8")
    src = tmp_path / "README.md"
    units = dict(i18n._markdown(src))
    assert list(units) == [i18n.README_OPENING] + [i18n._slug(t) for t in i18n.README_SECTIONS]
    assert units[i18n.README_OPENING].startswith("An interactive") and "\n\n" not in units["opening"]
    assert units["course-map"].startswith("## Course map\n") and "\n## " not in units["course-map"]
    blocks = i18n.parse(i18n.updated(src, "zh", tmp_path), "zh")
    for b in blocks:
        b.text = "译文：" + b.en
    path = i18n.translations_path(src, "zh", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(i18n.render(blocks, "zh", "README"), encoding="utf-8")
    assert i18n.drift(src, "zh", tmp_path) == []
    out = i18n.generate(src, "zh", tmp_path)
    assert out.startswith("# lmcore") and out.count("译文：## ") == len(i18n.README_SECTIONS)
    assert out.index("译文：An interactive") < out.index(i18n._README_HEAD["zh"][1]) < out.index("译文：## ")
    assert i18n.edition_path(src, "zh", tmp_path) == tmp_path / "zh" / "README.md"
    src.write_text(
        readme.replace("## Troubleshooting\n", "## Troubleshooting\nA new first line.\n"), encoding="utf-8"
    )
    (problem,) = i18n.drift(src, "zh", tmp_path)
    assert (problem.notebook, problem.cell, problem.kind) == ("README.md", "troubleshooting", "stale")
    assert "+A new first line." in problem.detail


def test_revised_blocks_take_the_english_as_it_is_now_and_nothing_else(tmp_path):
    """The step after revising a stale translation: the block records the new English and its hash,
    its translation is kept, the other blocks are untouched; a cell with no block is refused."""
    nb = _fake_repo(tmp_path)
    cell = _edit_markdown(nb, 1, "A changed sentence.")
    (problem,) = [p for p in i18n.drift(nb, "zh", tmp_path) if p.cell == cell]
    assert problem.kind == "stale"
    before = {b.cell: b for b in i18n.load(nb, "zh", tmp_path)}
    text = i18n.revised(nb, "zh", [cell], tmp_path)
    after = {b.cell: b for b in i18n.parse(text, "zh")}
    assert after[cell].text == before[cell].text and after[cell].en.endswith("A changed sentence.")
    assert all(after[c] == before[c] for c in after if c != cell)
    i18n.translations_path(nb, "zh", tmp_path).write_text(text, encoding="utf-8")
    assert [p for p in i18n.drift(nb, "zh", tmp_path) if p.cell == cell] == []
    with pytest.raises(ValueError, match="no-such-cell"):
        i18n.revised(nb, "zh", ["no-such-cell"], tmp_path)
