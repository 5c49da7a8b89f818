"""Notebook 10's exercises: a loss that accepts several right answers (stable at logits near
1000), the context coverage of a row, the same coverage in a packed row whose documents
cannot see each other (the notebook prints one only after its check), and one decode step of lmcore's
GPT with a key/value cache (the notebook calls the cached path; the learner writes its step).

Each checker runs the learner's function with warnings captured and with calls to the course's
own reference recorded (the kit's ``check(..., forbid=...)``): a call fails the check with "your
function called ...: write it yourself".
"""

from __future__ import annotations

import functools
import math

import torch

from ..._validate import require_int_scalar
from ...shift import mask_cross_document_targets
from ..checks import Case, check, compare, float32_atol
from .data import context_coverage
from .inference import _cached_pass, forward_cached
from .lesson import set_nll

_SET_NLL = "lmcore.course.rewards.lesson.set_nll"
_COVERAGE = "lmcore.course.rewards.data.context_coverage"

__all__ = [
    "check_set_nll",
    "check_context_coverage",
    "document_coverage",
    "check_document_coverage",
    "check_decode_step",
]


# ---------------------------------------------------------------- several right answers


def _set_cases() -> list[Case]:
    g = torch.Generator().manual_seed(10)
    cases = [
        Case((torch.tensor([2.0, 1.0, 0.0]), [1]), label="logits [2, 1, 0], acceptable [1]"),
        Case((torch.tensor([2.0, 1.0, 0.0]), [0, 1]), label="logits [2, 1, 0], acceptable [0, 1]"),
        Case((torch.tensor([0.0, 5.0, 5.0, -2.0]), [2, 1]), label="two equally likely right answers [2, 1]"),
        Case((torch.tensor([1000.0, 999.0, 0.0]), [1, 2]), label="logits [1000, 999, 0], acceptable [1, 2]"),
        Case((torch.tensor([1000.0, 0.0, -5.0]), [2]), label="logits [1000, 0, -5], acceptable [2]"),
        Case(
            (torch.tensor([-5.0, 1000.0, -7.0, 990.0], dtype=torch.float64), [0, 2]),
            label="float64 logits [-5, 1000, -7, 990], acceptable [0, 2]",
        ),
    ]
    for v, k in ((6, 2), (10, 3), (20, 5), (7, 1)):
        z = torch.randn(v, generator=g, dtype=torch.float64) * 3
        ids = torch.randperm(v, generator=g)[:k].tolist()
        cases.append(Case((z, ids)))
    return cases


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _explain_set_nll(fn, case, expected, got) -> str:
    """What a wrong set loss did on the failing case, as a question: a value that is not finite
    (a probability formed first, or an exp of a large logit), one acceptable id's loss alone, the
    sum or the mean of the ids' separate losses, the largest logits alone."""
    z, ids = case.args[0].double(), list(case.args[1])
    try:
        g = float(got)
    except (TypeError, ValueError, RuntimeError):
        return ""
    if not math.isfinite(g):
        return (
            f"your result is {g} on logits as large as {float(z.abs().max()):.0f}, though the loss there "
            f"is an ordinary number ({float(expected):.4g} nats): which step of your computation leaves "
            "floating point's range (a probability that rounds to 0, an exp that overflows), and can "
            "you reach the loss without that step?"
        )
    if float(expected) > 100 and 0 < g < 0.5 * float(expected):  # a tiny probability floored, then -ln
        return (
            f"your result is {g:.4g} nats where the logits lie {float(z.max() - z[ids].max()):.0f} apart: "
            "how small is the acceptable ids' probability here, and what did your computation put in "
            "its place when floating point could not hold it?"
        )
    if _close(g, float(z.max() - z[ids].max())):
        return (
            "your value uses only the largest logit of all and the largest of the acceptable ones: "
            "what do the other tokens' logits contribute to a softmax probability?"
        )
    if len(ids) < 2:
        return ""
    lse = float(torch.logsumexp(z, 0))
    singles = {i: lse - float(z[i]) for i in ids}
    for i, s in singles.items():
        if _close(g, s):
            return (
                f"your value is the loss of id {i} alone; the event here is 'the next token is one of "
                f"{ids}'. Is that event's probability the probability of id {i}?"
            )
    if _close(g, sum(singles.values())):
        return (
            f"your value is the sum of the separate losses of the ids {ids}, the loss of a model asked "
            "for each of them in turn; the event here is 'the next token is one of them'. What is its "
            "probability?"
        )
    if _close(g, sum(singles.values()) / len(ids)):
        return (
            f"your value is the mean of the separate losses of the ids {ids}: is it -ln of the "
            "probability of any event? What is the probability that the next token is one of them?"
        )
    return ""


def check_set_nll(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(logits (V,), acceptable ids) -> -ln(total probability of the acceptable ids)``."""
    return check(
        "loss with several right answers",
        fn,
        set_nll,
        _set_cases(),
        atol=lambda logits, acceptable: float32_atol(logits),  # a float32 log-sum-exp near 1000 is right
        rtol=1e-6,
        quiet=quiet,
        forbid=[_SET_NLL],
        explain=_explain_set_nll,
        hint=(
            "With several acceptable answers, is the loss about one answer's probability or about all"
            " of them together? Try logits near 1000: does your value stay finite?",
            "add the probabilities of the acceptable answers first, then "
            "take -ln of the sum (a log-sum-exp over those logits minus the one over all); "
            "stay stable for logits near 1000: a probability of e^-1005 is 0 in floating point, its "
            "log is not.",
        ),
    )


# ---------------------------------------------------------------- context coverage


def _coverage_cases() -> list[Case]:
    pairs = [
        (8, 3),
        (8, 1),
        (8, 0),
        (8, 7),
        (8, 8),
        (8, 20),
        (64, 32),
        (2048, 1000),
        (2, 1),
        (1024, 513),
        (16, 15),
        (128, 100),
    ]
    return [Case((L, k), label=f"block_size={L}, k={k}") for L, k in pairs]


def _explain_coverage(fn, case, expected, got) -> str:
    """A wrong coverage share, by the count it makes: out of [0, 1], over L instead of the
    targets, a target counted or missed at the edge, a count instead of a share."""
    L, k = case.args
    try:
        g = float(got)
    except (TypeError, ValueError, RuntimeError):
        return ""
    n, e = L - 1, float(expected)
    if g < 0:
        return f"your share is {g:.4g} at k = {k}, rows of {L}: can fewer than no targets see {k} tokens?"
    if g > 1:
        kind = "a count, not a share" if g == int(g) else "more than all of them"
        return (
            f"your share is {g:.4g} at k = {k}, rows of {L}: {kind}. How many targets does the row have, "
            "and which of them do you count?"
        )
    if _close(g * L, e * n) and e > 0:
        return f"your share divides by {L}, the row's tokens: how many of those tokens are targets?"
    if abs(g - e) * n > 0.5:  # a whole number of targets more or fewer than the right count
        more = round((g - e) * n)
        return (
            f"at k = {k}, rows of {L}, you count {abs(more)} target{'s' if abs(more) != 1 else ''} "
            f"{'more' if more > 0 else 'fewer'} than see at least {k} earlier tokens: how many tokens does "
            f"the target at position t see, and does one that sees exactly {k} count?"
        )
    return ""


def check_context_coverage(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(block_size, k) -> share of a row's targets with at least k tokens of context``."""
    return check(
        "context coverage",
        fn,
        context_coverage,
        _coverage_cases(),
        atol=1e-12,
        rtol=1e-6,  # a share computed in float32 is right; a wrong count is off by 1 / (L - 1) or more
        quiet=quiet,
        # the next exercise's reference on one document is this one's answer (a review found it passed)
        forbid=[_COVERAGE, "lmcore.course.rewards.exercises.document_coverage"],
        explain=_explain_coverage,
        hint=(
            "How many targets does a row of L tokens have, and how many earlier tokens does each one "
            "see? What must the share be at the edges: k = 0, and k larger than L?",
            "a row of L tokens has L - 1 targets; the target at position t sees t "
            "earlier tokens (t = 1 .. L - 1). Count those with t >= k, and never "
            "return less than 0.",
        ),
    )


# ---------------------------------------------------------------- coverage in a packed row


def document_coverage(doc_lengths, k: int) -> float:
    """Share of the valid targets of one packed row that see at least ``k`` tokens of their own
    document. The row holds documents of ``doc_lengths`` tokens (each with its EOS) back to back,
    with a block-diagonal mask and positions reset, and each document's first token is no target
    (:func:`lmcore.shift.mask_cross_document_targets`); a target ``o`` tokens into its document
    sees those ``o`` tokens."""
    if not isinstance(doc_lengths, (list, tuple)) or not doc_lengths:
        raise TypeError(f"doc_lengths must be a non-empty list of ints; got {doc_lengths!r}.")
    lengths = [require_int_scalar("doc_lengths[i]", n, min=1) for n in doc_lengths]
    k = require_int_scalar("k", k, min=0)
    if sum(lengths) < 2:
        raise ValueError(f"the row needs at least 2 tokens; got doc_lengths={doc_lengths!r}.")
    doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))[None]  # (1, L)
    labels = mask_cross_document_targets(torch.zeros_like(doc), doc)[0]
    start = torch.cumsum(torch.tensor([0] + lengths[:-1]), 0)[doc[0]]  # each position's doc start
    seen = torch.arange(doc.shape[1]) - start  # tokens of its own document before position t
    valid = labels[1:] != -100
    n_valid = int(valid.sum())
    return int(((seen[1:] >= k) & valid).sum()) / n_valid if n_valid else 0.0


def _document_cases() -> list[Case]:
    # every document has a token before its EOS: lmcore.pack_documents refuses an empty one, so an
    # answer built on it is right on every case (a learner's pass found [1, 8] refused it)
    rows = [
        ([64], 32),
        ([10, 10], 5),
        ([3, 20, 7], 4),
        ([5, 5, 5, 5], 1),
        ([2, 8], 2),
        ([12, 2, 2, 12], 0),
        ([30, 2, 30], 10),
        ([100, 28], 50),
        ([6, 9, 4, 13, 32], 7),
        ([40, 24], 40),
    ]
    return [Case((list(d), k), label=f"doc_lengths={d}, k={k}") for d, k in rows]


def _explain_document_coverage(fn, case, expected, got) -> str:
    """What a wrong packed-row share did, as a question: the row read as one document (contexts
    that run across document starts), or every position after the first counted as a target."""
    d, k = case.args
    try:
        g = float(got)
    except (TypeError, ValueError, RuntimeError):
        return ""
    L = sum(d)
    seen = sum(max(0, n - max(k, 1)) for n in d)
    if _close(g, max(0, L - max(k, 1)) / (L - 1)):
        return (
            f"your share is the one of a single document of {L} tokens: with the block-diagonal mask, "
            "how many tokens does a target just after a document's start see?"
        )
    if _close(g, seen / (L - 1)):
        return (
            f"your share divides by {L - 1} targets, every position of the row but the first: does the "
            "packed row's loss keep every one of them?"
        )
    sized = [n for n in d if n > 1]
    if len(set(sized)) > 1 and _close(g, sum(max(0, n - max(k, 1)) / (n - 1) for n in sized) / len(sized)):
        return (
            "your share is the mean of the documents' own shares: in the row's loss, does a target of a "
            f"{min(sized)}-token document weigh more than one of a {max(sized)}-token document?"
        )
    return ""


def check_document_coverage(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(doc_lengths, k) -> share of a packed row's valid targets with >= k tokens of
    their own document`` (the block-diagonal mask cuts each context at its document start)."""
    return check(
        "context coverage in a packed row",
        fn,
        document_coverage,
        _document_cases(),
        atol=1e-12,
        rtol=1e-6,  # a share computed in float32 is right; a wrong count is off by 1 / (L - 1) or more
        quiet=quiet,
        forbid=[_COVERAGE, "lmcore.course.rewards.exercises.document_coverage"],
        explain=_explain_document_coverage,
        hint=(
            "In a packed row, where does a target's context start: at the row's start or at its "
            "document's? Which token of a document is no target?",
            "inside a document of n tokens the targets are its tokens 1 .. n - 1 (its first "
            "token is no target: it follows another document), and token o sees o tokens; count "
            "over every document, then divide by all valid targets of the row.",
        ),
    )


# ---------------------------------------------------------------- one decode step with the cache

_RECOMPUTE = "a decode step feeds only the new token: use the cached keys and values"


def _decode_model(n_head: int, seed: int):
    from ...model import GPT, GPTConfig

    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=23, block_size=20, n_layer=2, n_head=n_head, n_embd=16, init_std=0.3)
    return GPT(cfg).double().eval()


def _decode_cases() -> list[tuple]:
    """(model, Case) pairs: a cache of P positions (from :func:`forward_cached`) and N new tokens;
    one cache is empty (P = 0: the first token of a text, position 0)."""
    out = []
    shapes = ((2, 1, 1), (2, 2, 5), (4, 3, 12), (1, 2, 19), (4, 1, 7), (2, 2, 0))
    for k, (n_head, N, P) in enumerate(shapes):
        model = _decode_model(n_head, seed=k)
        g = torch.Generator().manual_seed(100 + k)
        prefix = torch.randint(0, 23, (N, P), generator=g)
        _, cache = forward_cached(model, prefix)
        token = torch.randint(0, 23, (N,), generator=g)
        label = f"N={N} rows, P={P} cached positions, {n_head} head(s)"
        out.append((model, Case((token, cache), label=label)))
    return out


@torch.no_grad()
def _decode_variant(model, token, cache, *, shift: int = 0, first_key_only: bool = False):
    """The logits of a decode step as two plausible mistakes make it, or None: the new token at
    position ``P + shift``, or its one query reading key 0 alone (what SDPA's ``is_causal=True``
    does to one query against ``P + 1`` keys: its causal mask is aligned top-left)."""
    P = cache[0][0].shape[2]
    if not 0 <= P + shift < model.config.block_size:
        return None
    sees = torch.arange(P + 1, device=token.device) < (1 if first_key_only else P + 1)  # keys its query reads
    logits, _ = _cached_pass(model, token[:, None], list(cache), start=P + shift, sees=sees[None])
    return logits[:, 0]


def _explain_logits(case, got_logits) -> str:
    """Wrong logits that match a known mistake: the position number, or a mask for one query."""
    model, (token, cache) = case.kwargs["_model"], case.args
    P = cache[0][0].shape[2]
    if P == 0:
        return ""
    first_key = _decode_variant(model, token, cache, first_key_only=True)
    if compare(first_key, got_logits, atol=1e-5, rtol=1e-5) is None:
        return (
            f"your logits are those of a newest position whose query reads key 0 alone, of the {P + 1} "
            f"keys ({P} cached and its own): which of them may the newest position read, and what does "
            "your attention call let one query see?"
        )
    for shift in (1, -1, -P):  # the new token numbered P + 1, P - 1 or 0
        other = _decode_variant(model, token, cache, shift=shift)
        if other is not None and compare(other, got_logits, atol=1e-5, rtol=1e-5) is None:
            return (
                f"your logits are those of the new token at position {P + shift}: the cache holds {P} "
                f"position{'s' if P != 1 else ''}, numbered from 0; which position number comes after them?"
            )
    return ""


def _explain_cache(fn, case, expected, got) -> str:
    """When the logits are right and the returned cache is not: which block's keys or values;
    when the logits are wrong, the two mistakes a generic nudge does not name."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return ""
    if compare(expected[0], got[0]) is not None:
        try:
            return _explain_logits(case, got[0])
        except Exception:  # noqa: BLE001 - a result of the wrong shape or type: the generic nudge
            return ""
    for b, (want, have) in enumerate(zip(expected[1], got[1])):
        for part, e, g in zip(("keys", "values"), want, have):
            if compare(e, g) is None:
                continue
            if tuple(e.shape) != tuple(g.shape):
                return (
                    f"your logits are right, but the cache you return holds block {b}'s {part} with shape "
                    f"{tuple(g.shape)}, not {tuple(e.shape)}: what must the next step find in it?"
                )
            return f"your logits are right, but block {b}'s {part} in the cache you return differ: what must the next step read there?"
    return ""


def check_decode_step(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(model, token (N,), cache) -> (logits (N, V), cache extended by one position)``
    against :func:`lmcore.course.rewards.inference.forward_cached` on small float64 GPTs."""
    pairs = _decode_cases()
    models = {id(case): model for model, case in pairs}

    def reference(token, cache, _model=None):
        logits, new = forward_cached(_model, token[:, None], cache)
        return logits[:, 0], new

    cases = [Case(c.args, {"_model": models[id(c)]}, c.label) for _, c in pairs]

    @functools.wraps(fn)  # the learner's name, for show_solution's pointer
    def learner(token, cache, _model=None):
        with torch.no_grad():
            return fn(_model, token, cache)

    return check(
        "one decode step with the key/value cache",
        learner,
        reference,
        cases,
        atol=1e-5,  # a step computed in float32 is right (its logits differ by about 1e-6 here);
        rtol=1e-5,  # every plausible wrong step is off by more than 0.01
        quiet=quiet,
        no_mutation=False,  # the model is an input; the cache is compared as a result
        explain=_explain_cache,
        forbid={
            "lmcore.course.rewards.inference.forward_cached": "write the step yourself",
            "lmcore.course.rewards.inference._cached_pass": "write the step yourself",
            "lmcore.model.GPT.forward": _RECOMPUTE,
            "lmcore.model.GPT.hidden_states": _RECOMPUTE,
            "lmcore.model.Block.forward": "write the block's attention step yourself",
            "lmcore.model.CausalSelfAttention.forward": "write the attention step yourself",
        },
        hint=(
            "Your step must see what the full forward sees at the newest position: which position "
            "number does the new token have, and which keys, cached and new, does its query read? "
            "And does every step of GPT.forward happen in yours, in its order: the scale of the "
            "scores, how c_attn's output splits into q, k and v, the final LayerNorm?",
            "in each block: h = ln_1(x); q, k, v from c_attn(h), split into heads; append k and v to "
            "the block's cache before attending (the new position reads itself too); "
            "x = x + c_proj(heads merged); x = x + mlp(ln_2(x)); logits = lm_head(ln_f(x)).",
        ),
    )
