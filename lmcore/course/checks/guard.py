"""How a check runs the learner's function: warnings captured, forbidden calls recorded.

- :func:`captured_warnings` collects every Python warning (NumPy's RuntimeWarnings, PyTorch's
  UserWarnings) raised inside it, so none reaches stderr (nbgrader scores a cell that writes to
  stderr 0) and the check can report it in words instead.
- :func:`recorded_calls` records, while the learner's function runs, every call to a named
  reference (``"lmcore.handcalc.softmax"``, ``"torch.softmax"``, ``"torch.Tensor.softmax"``,
  ``"torch.autograd.grad"``), however it was imported or aliased: it watches calls with
  ``sys.setprofile`` and matches the function's own code object (beneath its decorators, whose
  wrapper code other functions share), the builtin itself, a callable object's ``__call__`` on
  that very object (an aten op, ``torch.ops.aten._softmax``), a NumPy ufunc (``numpy.logaddexp``
  watches ``np.logaddexp.reduce`` and, by standing in for the ufunc on its module while the
  learner's function runs, ``np.logaddexp(a, b)``; a name bound to the ufunc before the check
  is not seen), or (for a
  ``Tensor`` method) the method's name on any tensor. The reference still runs; the check then
  says "your function called lmcore.handcalc.softmax: write it yourself".
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import warnings
from collections.abc import Iterable

import numpy as np

__all__ = ["captured_warnings", "recorded_calls", "resolve", "available", "warning_text", "AUTOGRAD", "GRAPH"]


@contextlib.contextmanager
def captured_warnings():
    """Yield a list that collects every warning raised inside (none is printed)."""
    # NumPy's defaults: overflow, 0-division and invalid values warn, underflow (exp(-1000) = 0) does not
    with (
        warnings.catch_warnings(record=True) as caught,
        np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"),
    ):
        warnings.simplefilter("always")
        yield caught


# warnings a right answer meets in ordinary code, which the pass line need not worry a learner with
_HARMLESS = ("Converting a tensor with requires_grad=True to a scalar",)


def warning_text(caught: list) -> str:
    """The first captured warning in a few words ("" if none, or only harmless ones)."""
    caught = [w for w in caught if not str(w.message).startswith(_HARMLESS)]
    if not caught:
        return ""
    w = caught[0]
    more = f" (and {len(caught) - 1} more)" if len(caught) > 1 else ""
    return f"{w.category.__name__}: {str(w.message).splitlines()[0][:100]}{more}"


def resolve(dotted: str):
    """The object a dotted name such as ``"torch.nn.functional.softmax"`` names."""
    if not isinstance(dotted, str) or not dotted:
        raise TypeError(f"a forbidden name must be a dotted string; got {dotted!r}")
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ValueError(f"cannot find {dotted!r}")


def available(names: Iterable[str]) -> list[str]:
    """The ``names`` that exist here (``scipy.special.softmax`` only where SciPy is installed)."""
    out = []
    for name in names:
        try:
            resolve(name)
        except (ValueError, AttributeError):
            continue
        out.append(name)
    return out


def _own_code(obj):
    """The code object of ``obj``'s own body: through a bound method's ``__func__`` and through
    every decorator that keeps ``__wrapped__`` (``functools.wraps``, ``torch.no_grad()``,
    ``torch.inference_mode()``), whose wrapper code is shared by every function it decorates and
    so must never be matched (a learner's decorated function would read as the reference)."""
    obj = getattr(obj, "__func__", obj)
    seen = set()
    while hasattr(obj, "__wrapped__") and id(obj) not in seen:
        seen.add(id(obj))
        obj = getattr(obj.__wrapped__, "__func__", obj.__wrapped__)
    return getattr(obj, "__code__", None)


def _matcher(dotted: str):
    obj = resolve(dotted)
    code = _own_code(obj)
    if code is not None:
        return "call", code
    owner, _, name = dotted.rpartition(".")
    owner_obj = resolve(owner) if owner else None
    if isinstance(owner_obj, type):  # a method of a C type, e.g. torch.Tensor.softmax
        return "method", (owner_obj, name)
    codes = _call_codes(obj)
    if codes:  # a callable object, e.g. torch.ops.aten._softmax (and its overloads)
        return "instance", (codes, obj)
    return "c_call", obj


def _call_codes(obj) -> list:
    """The code objects of ``obj``'s class's ``__call__`` and, for an aten op, of its overloads'."""
    found = []
    overloads = getattr(obj, "overloads", None)
    names = overloads() if callable(overloads) else []
    for this in [obj] + [getattr(obj, name, None) for name in names]:
        call = next((k.__dict__["__call__"] for k in type(this).__mro__ if "__call__" in k.__dict__), None)
        code = getattr(call, "__code__", None)
        if code is not None and code not in found:
            found.append(code)
    return found


def _is_instance_call(frame, obj) -> bool:
    """Whether ``frame`` (a call of a callable object's ``__call__``) calls ``obj`` itself or one
    of its overloads (``torch.ops.aten._softmax.default`` belongs to ``torch.ops.aten._softmax``)."""
    this = frame.f_locals.get("self")
    return this is obj or getattr(this, "overloadpacket", None) is obj


# Not a call: an autograd graph recorded inside (a tensor that requires grad went through an
# operation that saves its inputs for backward). Calling the graph's nodes by hand, or the engine
# under another name, needs one; a gradient worked out by hand never builds one.
GRAPH = "torch.autograd (a graph recorded for backward)"


@contextlib.contextmanager
def recorded_calls(names: Iterable[str]):
    """Yield a list that collects (in call order, once each) the ``names`` called inside;
    :data:`GRAPH` among them notes an autograd graph recorded inside."""
    names = list(names)
    if GRAPH in names:
        names.remove(GRAPH)
        with recorded_calls(names) as called, _graph_watch(called):
            yield called
        return
    matchers = [(n, *_matcher(n)) for n in names]
    codes = {m: n for n, kind, m in matchers if kind == "call"}
    builtins = {id(m): (n, m) for n, kind, m in matchers if kind == "c_call"}
    methods = [(n, m) for n, kind, m in matchers if kind == "method"]
    instances: dict = {}
    for n, kind, m in matchers:
        if kind == "instance":
            for code in m[0]:
                instances.setdefault(code, []).append((n, m[1]))
    called: list[str] = []

    def note(name):
        if name not in called:
            called.append(name)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            note(codes[frame.f_code])
        elif event == "call" and frame.f_code in instances:
            for n, obj in instances[frame.f_code]:
                if _is_instance_call(frame, obj):
                    note(n)
        elif event == "c_call":
            for this in (arg, getattr(arg, "__self__", None)):  # a ufunc's .reduce is its own
                hit = builtins.get(id(this))
                if hit is not None and this is hit[1]:
                    note(hit[0])
            for n, (owner, attr) in methods:
                if getattr(arg, "__name__", None) == attr and isinstance(
                    getattr(arg, "__self__", None), owner
                ):
                    note(n)

    if not matchers:  # nothing to watch: no profiler, no cost
        yield called
        return
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        with _ufuncs_watched([(n, m) for n, kind, m in matchers if kind == "c_call"], note):
            yield called
    finally:
        sys.setprofile(previous)


class _UfuncWatch:
    """Stands in for a NumPy ufunc on its module: a call is noted (a ufunc's own call is no
    profiler event); its methods (``.reduce``, ``.accumulate``) are the ufunc's, seen as before."""

    def __init__(self, ufunc, seen):
        self._ufunc, self._seen = ufunc, seen

    def __call__(self, *args, **kwargs):
        self._seen()
        return self._ufunc(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._ufunc, name)


@contextlib.contextmanager
def _ufuncs_watched(watched, note):
    """While inside, each watched NumPy ufunc's module attribute (``numpy.logaddexp``) is a
    :class:`_UfuncWatch` that notes its name; restored after."""
    swapped = []
    for name, obj in watched:
        owner, _, attr = name.rpartition(".")
        module = sys.modules.get(owner)
        if isinstance(obj, np.ufunc) and module is not None and getattr(module, attr, None) is obj:
            setattr(module, attr, _UfuncWatch(obj, lambda name=name: note(name)))
            swapped.append((module, attr, obj))
    try:
        yield
    finally:
        for module, attr, obj in swapped:
            setattr(module, attr, obj)


@contextlib.contextmanager
def _graph_watch(called: list):
    """Note :data:`GRAPH` in ``called`` when a graph saves a tensor for backward inside."""
    import torch

    def pack(t):
        if GRAPH not in called:
            called.append(GRAPH)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield


# autograd in any form, reverse and forward mode: what "work it out by hand" rules out
AUTOGRAD = available(
    [
        "torch.autograd.grad",
        "torch.autograd.backward",
        "torch.Tensor.backward",
        "torch.autograd.functional.jacobian",
        "torch.autograd.functional.jvp",
        "torch.autograd.functional.vjp",
        "torch.autograd.forward_ad.make_dual",
        "torch.autograd.forward_ad.unpack_dual",
        "torch.func.grad",
        "torch.func.grad_and_value",
        "torch.func.vjp",
        "torch.func.jvp",
        "torch.func.jacrev",
        "torch.func.jacfwd",
        "torch.func.hessian",
        "torch._C._ImperativeEngine.run_backward",  # the engine itself, under torch.autograd.backward
        "torch.autograd.graph.disable_saved_tensors_hooks",  # would blind the graph watch below
    ]
) + [GRAPH]
