"""Teaching support for the lmcore course: one package per notebook topic, and the kit they share.

- Topic packages, one per notebook: ``start`` (00), ``softmax_nll`` (01), ``gradients`` (02),
  ``sequence`` (03), ``anchor`` (04), ``padding`` (05), ``packing`` (06), ``debugging`` (07),
  ``training`` (08), ``floor`` (09), ``rewards`` (10). Each holds ``lesson.py`` (the computation
  and the checks), ``views.py`` (plots and widgets) and one module per further part.
- The kit every notebook may use: ``checks`` (the exercise checker), ``verdict``, ``widgets``,
  ``toys``, ``style``, ``autograding``, ``solutions`` (``show_solution``), ``progress``,
  ``colab``.
- ``build``: the tools that make the course (student edition, notebook runner, grading).

Apart from the core on purpose: this subpackage may import matplotlib and ipywidgets; ``import
lmcore`` never does. Import modules directly, e.g. ``from lmcore.course.checks import check`` or
``from lmcore.course.padding import views``.
"""

__all__: list[str] = []
