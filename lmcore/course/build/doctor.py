"""``lmcore-course doctor``: is this machine ready for the course? One line per item, with its fix.

Each check returns a :class:`Finding`: ``ok``, ``warn`` (the course works, with a limit worth
knowing) or ``FAIL`` (something the course needs is missing or wrong), what was found, and for
anything but ``ok`` the command or step that fixes it. The items are the ones a learner meets on
their own laptop: the Python version; torch and its version against the floor the package
declares; the device a run would train on, which must give the CPU's loss and gradients on one
batch (:func:`lmcore.train.check_device_agrees`, the check ``train()`` runs before its first
step); the notebook stack; the widgets' JupyterLab extension (without it every slider shows as
text); a workspace folder it can write; free disk. ``doctor`` changes nothing on the machine:
the writable check creates a temporary file and removes it.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...train.agreement import FALLBACK
from ...train.device_check import check_device_agrees, device_needs_check  # a test stands a device in
from .paths import DEFAULT_WORKSPACE

__all__ = [
    "Finding",
    "MIN_PYTHON",
    "TORCH_FLOOR",
    "MIN_FREE_GB",
    "NOTEBOOK_STACK",
    "check_python",
    "check_torch",
    "check_device",
    "check_notebook_stack",
    "check_widgets",
    "check_workspace",
    "check_disk",
    "run_checks",
    "format_findings",
    "main",
]

MIN_PYTHON = (3, 10)  # pyproject's requires-python
TORCH_FLOOR = (2, 11)  # pyproject's torch>=2.11, tested by make test-torch TORCH=2.11.0
MIN_FREE_GB = 2.0  # the workspace, the training runs' checkpoints and pip's next install
NOTEBOOK_STACK = ("jupyterlab", "ipykernel", "ipywidgets", "nbformat", "nbclient", "matplotlib", "tqdm")
COURSE_INSTALL = 'pip install "lmcore[course]"'
STATUSES = ("ok", "warn", "FAIL")


@dataclass(frozen=True)
class Finding:
    """One item: its ``name``, ``status`` (``ok`` | ``warn`` | ``FAIL``), what was found, the fix."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}; got {self.status!r}.")

    def line(self) -> str:
        fix = f"  -> {self.fix}" if self.fix and self.status != "ok" else ""
        return f"{self.status:<4}  {self.name:<10} {self.detail}{fix}"


def _version_tuple(text: str) -> tuple[int, ...]:
    """(2, 11, 0) from '2.11.0+cpu' or '2.12.0.dev20260101'."""
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:3])


def check_python(version_info=None) -> Finding:
    v = tuple(version_info if version_info is not None else sys.version_info)[:3]
    shown = ".".join(str(x) for x in v)
    if v[:2] < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        return Finding(
            "python", "FAIL", f"{shown}, the course needs {need} or newer", f"install Python {need}+"
        )
    return Finding("python", "ok", shown)


def check_torch() -> Finding:
    floor = ".".join(map(str, TORCH_FLOOR))
    fix = f'pip install "torch>={floor}" (pytorch.org lists the build for your machine)'
    try:
        import torch
    except Exception as err:  # an ImportError, or a broken install raising anything
        return Finding("torch", "FAIL", f"does not import ({type(err).__name__}: {err})", fix)
    version = torch.__version__
    if _version_tuple(version)[:2] < TORCH_FLOOR:
        return Finding("torch", "FAIL", f"{version}, older than the floor {floor}", fix)
    return Finding("torch", "ok", version)


def _agreement_batch(vocab: int, rows: int = 4, length: int = 32) -> dict:
    import torch

    ids = torch.randint(0, vocab, (rows, length), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids.clone()}


def check_device(device: str = "auto") -> Finding:
    """The device ``train()`` would pick (``"auto"``: CUDA, then MPS, then the CPU); off the CPU,
    one batch of a small model must give the CPU's loss and gradients there."""
    try:
        import torch

        from ...model import GPT, GPTConfig
        from ...train import devices
    except Exception as err:
        return Finding("device", "FAIL", f"cannot check ({type(err).__name__}: {err})", "fix torch first")
    dev = devices.pick_device(device)
    if not device_needs_check(dev):
        return Finding(
            "device",
            "warn" if device == "auto" else "ok",
            "cpu: no CUDA or Apple MPS here; the course runs, notebook 08 trains on the CPU (slower)",
            "nothing needed; on a machine with a GPU, install the torch build for it (pytorch.org)",
        )
    try:
        torch.manual_seed(0)
        model = GPT(GPTConfig()).to(dev)
        result = check_device_agrees(
            model,
            _agreement_batch(model.config.vocab_size),
            dev,
            autocast_dtype=devices.autocast_dtype(dev, "auto"),
            raise_on_failure=False,
        )
    except Exception as err:
        return Finding(
            "device", "FAIL", f"{dev}: the check failed to run ({type(err).__name__}: {err})", FALLBACK
        )
    if not result.passed:
        return Finding("device", "FAIL", result.line(), FALLBACK)
    return Finding("device", "ok", result.line().removeprefix("device check: "))


def check_notebook_stack() -> Finding:
    missing = [m for m in NOTEBOOK_STACK if importlib.util.find_spec(m) is None]
    if missing:
        return Finding("notebooks", "FAIL", f"missing: {', '.join(missing)}", COURSE_INSTALL)
    return Finding("notebooks", "ok", ", ".join(NOTEBOOK_STACK))


def check_widgets() -> Finding:
    """ipywidgets 8 and its JupyterLab extension (``@jupyter-widgets/jupyterlab-manager``)."""
    fix = 'pip install "ipywidgets>=8" jupyterlab_widgets, then restart JupyterLab'
    try:
        from importlib.metadata import PackageNotFoundError, version

        widgets = version("ipywidgets")
    except PackageNotFoundError:
        return Finding("widgets", "FAIL", "ipywidgets is not installed", fix)
    if _version_tuple(widgets)[:1] < (8,):
        return Finding("widgets", "FAIL", f"ipywidgets {widgets}: the course's widgets need 8", fix)
    try:
        from jupyter_core.paths import jupyter_path
    except ImportError:
        return Finding(
            "widgets", "FAIL", "jupyter_core is missing (JupyterLab is not installed)", COURSE_INSTALL
        )
    rel = Path("@jupyter-widgets", "jupyterlab-manager", "package.json")
    if not any((Path(d) / rel).is_file() for d in jupyter_path("labextensions")):
        return Finding(
            "widgets", "FAIL", "JupyterLab's widget extension is not installed: sliders show as text", fix
        )
    return Finding("widgets", "ok", f"ipywidgets {widgets}, JupyterLab's widget extension installed")


def _existing(folder: Path) -> Path:
    """``folder`` or the nearest of its parents that exists (where it would be created)."""
    folder = folder.absolute()
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate
    return folder


def check_workspace(folder) -> Finding:
    folder = Path(folder)
    where = _existing(folder)
    fix = "choose a folder you can write: lmcore-course lab --workspace DIR"
    if not where.is_dir():
        return Finding("workspace", "FAIL", f"{where} is a file, not a folder", fix)
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as err:
        return Finding("workspace", "FAIL", f"cannot write in {where} ({err.strerror or err})", fix)
    state = "exists" if folder.is_dir() else f"will be created (in {where})"
    return Finding("workspace", "ok", f"{folder} {state}, writable")


def check_disk(folder, min_gb: float = MIN_FREE_GB) -> Finding:
    free = shutil.disk_usage(_existing(Path(folder))).free / 1e9
    if free < min_gb:
        return Finding(
            "disk", "FAIL", f"{free:.1f} GB free, the course needs about {min_gb:g} GB", "free some space"
        )
    return Finding("disk", "ok", f"{free:.1f} GB free")


def run_checks(workspace=DEFAULT_WORKSPACE, device: str = "auto") -> list[Finding]:
    """Every item, in order; a later item that needs an earlier one says so instead of failing."""
    findings = [check_python(), check_torch()]
    torch_ok = findings[-1].status == "ok"
    findings.append(
        check_device(device)
        if torch_ok
        else Finding("device", "FAIL", "not checked: torch is missing", "fix torch first")
    )
    findings += [check_notebook_stack(), check_widgets(), check_workspace(workspace), check_disk(workspace)]
    return findings


def format_findings(findings) -> str:
    failed = sum(f.status == "FAIL" for f in findings)
    tail = "ready for the course" if not failed else f"{failed} item(s) to fix before the course works"
    return "\n".join([*(f.line() for f in findings), tail])


def main(argv=None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workspace", default=None, help=f"the learner's folder (default: {DEFAULT_WORKSPACE})"
    )
    parser.add_argument(
        "--device", default="auto", help="the device to check (default: the one train() picks)"
    )
    args = parser.parse_args(argv)
    findings = run_checks(args.workspace or DEFAULT_WORKSPACE, args.device)
    print(format_findings(findings))
    return 1 if any(f.status == "FAIL" for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
