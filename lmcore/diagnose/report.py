"""The report of :func:`lmcore.diagnose.run_checks`: the check names in table order, one
:class:`CheckRow` per check, and the :class:`DiagnosisReport` that prints them as a table."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECK_NAMES", "CheckRow", "DiagnosisReport"]

CHECK_NAMES = (
    "finite_loss",
    "alignment",
    "perfect_logits",
    "zero_logits",
    "logit_scale",
    "last_unscored",
    "all_scored",
    "equal_weights",
    "padding_unscored",
    "eos_scored",
    "finite_logits",
    "future",
    "padding_unread",
    "left_padding",
    "first_loss",
)


@dataclass(frozen=True)
class CheckRow:
    """One line of the report: the check's ``name``, whether it ``passed`` (a ``skipped`` row
    counts as passed), why, and the measured ``value`` where there is one (first_loss)."""

    name: str
    passed: bool
    detail: str
    skipped: bool = False
    value: float | None = None

    @property
    def mark(self) -> str:
        return "– skip" if self.skipped else "✓ pass" if self.passed else "✗ FAIL"

    def __str__(self) -> str:
        return f"{self.name}: {self.mark}: {self.detail}"


@dataclass(frozen=True)
class DiagnosisReport:
    """The rows of :func:`run_checks`; prints as a table."""

    rows: tuple

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    @property
    def failed(self) -> tuple:
        """Names of the failing checks in table order: the bug's signature."""
        return tuple(r.name for r in self.rows if not r.passed)

    @property
    def skipped(self) -> tuple:
        return tuple(r.name for r in self.rows if r.skipped)

    def __getitem__(self, name: str) -> CheckRow:
        found = [r for r in self.rows if r.name == name]
        if not found:
            raise KeyError(f"no check named {name!r}; the checks are {[r.name for r in self.rows]}")
        return found[0]

    def __str__(self) -> str:
        w, run = max(len(r.name) for r in self.rows), len(self.rows) - len(self.skipped)
        head = (
            f"all {run} checks passed"
            if self.passed
            else f"{len(self.failed)} of {run} checks failed: {', '.join(self.failed)}"
        )
        head += f" ({len(self.skipped)} skipped: {', '.join(self.skipped)})" if self.skipped else ""
        return "\n".join(
            [head, f"{'check'.ljust(w)}  result  detail"]
            + [f"{r.name.ljust(w)}  {r.mark}  {r.detail}" for r in self.rows]
        )

    __repr__ = __str__
