"""The house rules, read from the source (every import, also those inside functions): no import
circle between lmcore's modules, the concepts at the top never reach into data/train, and the
core (everything but lmcore.course) never imports lmcore.course or a plotting library."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent / "lmcore"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
# the concepts at the top: the flat modules the course teaches, their private helpers, and the
# concept that is a package (lmcore.diagnose, with each of its modules)
CONCEPTS = sorted(
    m
    for m in MODULES
    if (m.count(".") == 1 and MODULES[m].name != "__init__.py")
    or m.partition(".")[2].split(".")[0] == "diagnose"
)


def imports(name: str) -> set[str]:
    """The modules ``name`` imports: lmcore modules by full name, others by top-level name."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            out |= set(targets) if targets else {base}
    return {m if m.startswith("lmcore") else m.split(".")[0] for m in out}


GRAPH = {m: {i for i in imports(m) if i in MODULES and i != m} for m in MODULES}


def test_the_reader_sees_every_module_and_its_imports():
    assert {"lmcore.shift", "lmcore.data.corpus", "lmcore.train.loop", "lmcore.course.toys"} <= set(MODULES)
    assert {"lmcore.loss", "lmcore.diagnose", "lmcore.diagnose.run", "lmcore._validate"} <= set(CONCEPTS)
    assert not any(m.startswith(("lmcore.data", "lmcore.train", "lmcore.course")) for m in CONCEPTS)
    assert "lmcore.shift" in GRAPH["lmcore.loss"] and "lmcore.train.presets" in GRAPH["lmcore.train.loop"]
    assert "lmcore.data.stdlib" in GRAPH["lmcore.data.corpus"]


def test_no_import_circle():
    state, path = {}, []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for n in sorted(GRAPH[m]):
            if state.get(n) == "open":
                pytest.fail("import circle: " + " -> ".join(path[path.index(n) :] + [n]))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = "done"

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if not m.startswith("lmcore.course")))
def test_the_core_never_imports_the_course_or_plots(name):
    bad = {i for i in imports(name) if i.startswith("lmcore.course")} | (
        imports(name) & {"matplotlib", "ipywidgets", "IPython"}
    )
    assert not bad, f"{name} imports {sorted(bad)}"


@pytest.mark.parametrize("name", sorted(CONCEPTS))
def test_the_concepts_at_the_top_stand_on_their_own(name):
    bad = {i for i in GRAPH[name] if i.startswith(("lmcore.data", "lmcore.train", "lmcore.course"))}
    assert not bad, f"{name} imports {sorted(bad)}"


COURSE = ROOT / "course"
# the kit every notebook may use; everything else in lmcore/course/ is one package per topic
KIT = {"autograding", "checks", "colab", "progress", "solutions", "style", "toys", "verdict", "widgets"}
TOPIC_NAMES = sorted(
    p.name for p in COURSE.iterdir() if (p / "__init__.py").is_file() and p.name not in KIT | {"build"}
)
TOPICS = sorted(
    m for m in MODULES if m.split(".")[2:3] and m.split(".")[2] in TOPIC_NAMES and m.count(".") == 3
)
NOTEBOOKS = sorted((ROOT.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _topic(name: str) -> str | None:
    """``lmcore.course.<topic>...`` -> topic; None for the kit, build and what is outside the course."""
    parts = name.split(".")
    return (
        parts[2] if len(parts) > 2 and parts[:2] == ["lmcore", "course"] and parts[2] in TOPIC_NAMES else None
    )


def test_the_course_folder_holds_the_kit_and_one_package_per_topic():
    loose = sorted(p.name for p in COURSE.iterdir() if p.suffix == ".py" and p.stem not in KIT | {"__init__"})
    assert not loose, f"files directly in lmcore/course/ that are neither kit nor __init__: {loose}"
    folders = {p.name for p in COURSE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders == set(TOPIC_NAMES) | {"build", "checks"}, (
        f"folders that are not topic packages: {folders}"
    )
    assert len(TOPIC_NAMES) == len(NOTEBOOKS) == 11 and {"padding", "debugging", "floor"} <= set(TOPIC_NAMES)
    for topic in TOPIC_NAMES:  # an __init__ that says what is inside and exports its parts
        init = MODULES[f"lmcore.course.{topic}"].read_text()
        parts = {m.rpartition(".")[2] for m in TOPICS if _topic(m) == topic}
        unnamed = sorted(p for p in parts if f"``{p}``" not in init)
        assert ast.get_docstring(ast.parse(init)) and not unnamed, f"{topic}/__init__ does not name {unnamed}"


@pytest.mark.parametrize("name", TOPICS)
def test_topic_modules_import_the_kit_never_another_topic(name):
    """A topic's modules may use each other, the kit and the core; a helper two topics need belongs
    in the kit (or in the core)."""
    other = {i for i in GRAPH[name] if _topic(i) not in (None, _topic(name))}
    assert not other, f"{name} imports other topics' modules {sorted(other)}"


def _notebook_course_imports(path: Path) -> set[str]:
    import nbformat

    out = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code" or "lmcore.course" not in cell.source:
            continue
        tree = ast.parse(
            "\n".join(line for line in cell.source.splitlines() if not line.startswith(("%", "!")))
        )
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lmcore.course"):
                out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name.startswith("lmcore.course")}
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_a_notebook_imports_its_topic_package_and_the_kit_only(path):
    used = _notebook_course_imports(path)
    topics = {_topic(m) for m in used} - {None}
    assert len(topics) == 1, (
        f"{path.name} imports the topics {sorted(topics)}: one topic package per notebook"
    )
    allowed = {f"lmcore.course.{k}" for k in KIT}
    strays = {
        m
        for m in used
        if _topic(m) is None
        and m != "lmcore.course"
        and not any(m == a or m.startswith(a + ".") for a in allowed)
    }
    assert not strays, f"{path.name} imports course modules outside its topic and the kit: {sorted(strays)}"


@pytest.mark.parametrize("name", [m for m in TOPICS if not m.endswith("views")])
def test_topic_computation_modules_do_not_import_plotting_at_the_top(name):
    tree = ast.parse(MODULES[name].read_text())
    top = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    top |= {(n.module or "").split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert not top & {"matplotlib", "ipywidgets"}, f"{name}: plots and widgets go in a views module"


def test_the_top_of_lmcore_holds_at_most_ten_modules():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 10, (
        f"{len(top)} modules directly in lmcore/ (a concept with parts is a package): {top}"
    )


def _long_functions(limit: int = 80) -> list[str]:
    out = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    out.append(f"{name}.{node.name}: {length} lines")
    return out


def test_no_function_in_lmcore_is_longer_than_80_lines():
    assert not _long_functions(), "functions that should read as a page of named steps: " + "; ".join(
        _long_functions()
    )
