"""``lmcore-course``: the course's one command, on any OS, with or without ``make``.

    lmcore-course lab [--edition instructor] [--workspace DIR] [--dry-run]
    lmcore-course progress [WORKSPACE]
    lmcore-course student [DIR] [--no-solutions]
    lmcore-course grade SUBMISSIONS [--out DIR]
    lmcore-course doctor [--workspace DIR] [--device DEV]
    lmcore-course translate [--lang zh] [--check] [--update] [--revised CELL ...] [NN_* ...]

Each subcommand is the ``main`` of the module that does the work (:data:`COMMANDS`); the
Makefile's ``lab``, ``progress``, ``student``, ``grade`` and ``doctor`` targets call this command,
so there is one implementation. ``lmcore-course SUBCOMMAND --help`` lists its options.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["PROG", "COMMANDS", "usage", "main"]

PROG = "lmcore-course"
# subcommand -> (module, its main's name, what it does)
COMMANDS = {
    "lab": ("lmcore.course.build.lab", "main", "build or refresh your workspace and open JupyterLab on it"),
    "progress": (
        "lmcore.course.progress",
        "main",
        "run every check of your workspace: a notebook x exercise table",
    ),
    "student": ("lmcore.course.build.workspace", "student_main", "write the student edition for a class"),
    "grade": ("lmcore.course.build.grade", "main", "grade submissions with nbgrader (the teach extra)"),
    "translate": (
        "lmcore.course.build.i18n",
        "main",
        "generate or check the translated notebooks (zh/notebooks/) from their translations",
    ),
    "doctor": (
        "lmcore.course.build.doctor",
        "main",
        "check this machine for the course: one line per item, with its fix",
    ),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROG} COMMAND [options]  ({PROG} COMMAND --help for its options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, _, what) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    """Run ``argv`` (default ``sys.argv[1:]``): the subcommand's exit code; 2 for an unknown one."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"{PROG}: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    return int(getattr(importlib.import_module(module), func)(rest, prog=f"{PROG} {name}") or 0)


if __name__ == "__main__":
    sys.exit(main())
