"""Build tools of the course, apart from what a notebook imports: run them with ``python -m``.

- :mod:`~lmcore.course.build.student`: the student edition (solutions replaced by stubs).
- :mod:`~lmcore.course.build.workspace`: the learner's ``workspace/`` and ``make student``, never
  replacing a notebook the learner changed; :mod:`~lmcore.course.build.lab`: ``make lab``.
- :mod:`~lmcore.course.build.command`: ``lmcore-course``, the one command the Makefile's lab,
  progress, student, grade and doctor targets call; :mod:`~lmcore.course.build.doctor`: its
  ``doctor``; :mod:`~lmcore.course.build.paths`: where the course and the workspace are (a clone
  or an installed wheel); :mod:`~lmcore.course.build.wheel_check`: ``make test-wheel``.
- :mod:`~lmcore.course.build.nbtools`: re-execute notebooks in place, ``make notebooks``.
- :mod:`~lmcore.course.build.nbgrader_meta`: stamp nbgrader's cell metadata on the notebooks.
- :mod:`~lmcore.course.build.nbpolicy`: the notebook policy (ignored outputs, quoted numbers).
- :mod:`~lmcore.course.build.grade` and :mod:`~lmcore.course.build.grade_report`: ``make grade``.
- :mod:`~lmcore.course.build.figures`: regenerate ``figures/``, ``make figures``.
- :mod:`~lmcore.course.build.portable`: nbval under other CPU code paths, ``make test-portable``.

(:mod:`lmcore.course.autograding` stays in ``lmcore.course``: notebooks call it at run time.)
"""

__all__ = [
    "figures",
    "grade",
    "grade_report",
    "nbgrader_meta",
    "nbpolicy",
    "nbtools",
    "portable",
    "student",
    "workspace",
    "lab",
    "command",
    "doctor",
    "paths",
    "wheel_check",
]
