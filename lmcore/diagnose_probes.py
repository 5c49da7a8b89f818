"""Moved to :mod:`lmcore.diagnose.probes` (``gradient_reading`` is also exported by
:mod:`lmcore.diagnose`). This name stays only while lmcore.course's debugging exercises import
``from ..diagnose_probes import gradient_reading``; delete it once they import from lmcore.diagnose."""

from .diagnose.probes import *  # noqa: F403
from .diagnose.probes import __all__  # noqa: F401
