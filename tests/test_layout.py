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


def _topic(name: str) -> str:
    return name.rpartition(".")[2].split("_")[0]


KIT = {"toys", "widgets", "checks", "verdict", "style", "autograding"}
TOPICS = sorted(
    m for m in MODULES if m.startswith("lmcore.course.") and m.count(".") == 2 and _topic(m) not in KIT
)


@pytest.mark.parametrize("name", TOPICS)
def test_topic_modules_import_the_kit_never_another_topic(name):
    """``<topic>.py``, ``<topic>_views.py`` (and ``<topic>_<part>.py``) may use each other and the
    shared kit; a helper two topics need belongs in the kit."""
    other = {
        i
        for i in GRAPH[name]
        if i.startswith("lmcore.course.")
        and i.count(".") == 2
        and _topic(i) not in KIT  # the kit: checks, checks_guard, checks_report, ...
        and _topic(i) != _topic(name)
    }
    assert not other, f"{name} imports other topics' modules {sorted(other)}"


@pytest.mark.parametrize("name", [m for m in TOPICS if not m.endswith("_views")])
def test_topic_computation_modules_do_not_import_plotting_at_the_top(name):
    tree = ast.parse(MODULES[name].read_text())
    top = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    top |= {(n.module or "").split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert not top & {"matplotlib", "ipywidgets"}, f"{name}: plots and widgets go in a _views module"
