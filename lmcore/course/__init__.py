"""Teaching support for the lmcore course: exercise checks, widgets, plots, the student edition.

Apart from the core on purpose: this subpackage may import matplotlib and ipywidgets; ``import
lmcore`` never does. Import submodules directly, e.g. ``from lmcore.course.checks import check``.
"""

__all__: list[str] = []
