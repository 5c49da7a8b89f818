"""Notebook 07's two exercises and their checkers.

1. ``my_loss_fn`` (section 7): a completion-only loss written with ``F.cross_entropy`` (the first
   :data:`PROMPT` tokens of each row are a prompt, never targets) plus a z-loss, :data:`Z_LOSS`
   times the mean of (log Z)^2 over the positions it scores, graded position by position from the
   gradient and by value (cases whose unscored positions, or all, carry a large common offset,
   which moves log Z and not the probabilities), with lmcore's loss and the notebook's
   ``loss_fn`` rejected, then run through ``run_checks(..., unscored=prompt_tokens,
   z_loss=Z_LOSS)``; a wrong answer's first hint asks about the first position it grades wrongly,
   or where its z-loss looks (:func:`explain_loss`). It comes before the mysteries, whose code
   holds a correct padded loss (R) that would otherwise be its template; the worked loss is shown
   after its check (:func:`show_completion_loss`).
2. ``name_the_bugs`` (section 8): six unseen pipelines, shown as code (:func:`show_mystery`); their
   ``run_checks`` reports narrow each one to a class of bug, reading the code decides which
   member: five of the six signatures are shared by another cause of :data:`BUG_CHOICES`, two of
   them (R and U) by passing every row, so that "all checks passed" does not name "correct".
   After the check, :func:`show_underflow` shows what the checklist's moderate logits hide.
"""

from __future__ import annotations

import inspect
import itertools
import math

import torch
import torch.nn.functional as F

from ...diagnose import gradient_reading, run_checks
from ...train.devices import cpu_threads
from ..autograding import when_grading
from ..checks import Case, CheckResult, check, check_choices, key_search_refused
from ..toys import EOS, PAD, forward_with_mask
from .data import L, V
from .lesson import pipeline_gpt

__all__ = [
    "BUG_CHOICES",
    "PROMPT",
    "Z_LOSS",
    "prompt_tokens",
    "mystery_pipelines",
    "show_mystery",
    "mystery_report",
    "show_underflow",
    "check_mystery",
    "check_loss_fn",
    "explain_loss",
    "show_completion_loss",
]

BUG_CHOICES = {  # causes, finer than the signatures: some pairs share one
    "correct": "no bug",
    "same_position": "logits compared with the same position (no shift)",
    "double_shift": "shifted outside and inside the loss",
    "softmax_first": "softmax before the cross-entropy",
    "label_smoothing": "label smoothing that was not declared",
    "padding_scored": "padding positions scored (PAD -> PAD)",
    "mask_after_shift": "the last real token scored against the PAD after it",
    "batch_means": "per-row or per-micro-batch means averaged",
    "token_denominator": "summed NLL divided by the number of tokens, not of targets",
    "global_num_items": "summed NLL divided by a global num_items (correct once declared)",
    "eos_is_pad": "EOS ignored by its id because PAD = EOS",
    "specials_masked": "every special token masked by id, EOS included (PAD != EOS)",
    "detached": "some positions' logits cut from the graph",
    "logits_rescaled": "the logits rescaled inside the loss",
    "sees_future": "the model sees the future",
    "ignores_mask": "the model is called without the attention mask",
    "no_position_reset": "left padding without position reset",
    "log_of_softmax": "the log taken of a softmax's output",
}


def loss_p(logits, input_ids, attention_mask):
    targets = input_ids[:, 1:].clone()
    targets[attention_mask[:, :-1] == 0] = -100  # padding is not a target
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), targets)


def loss_q(logits, input_ids, attention_mask):
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="sum")
    return nll / attention_mask.sum()


def loss_r(logits, input_ids, attention_mask):
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    keep = labels != -100
    logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(logp * keep).sum() / keep.sum()


def loss_s(logits, input_ids, attention_mask):
    labels = input_ids.clone()
    for special in (PAD, EOS):  # special tokens are not targets
        labels[labels == special] = -100
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:])


def loss_t(logits, input_ids, attention_mask):
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    with torch.no_grad():  # the first 4 positions' loss, kept for the log
        head = F.cross_entropy(logits[:, :4].transpose(1, 2), labels[:, :4], reduction="sum")
    rest = F.cross_entropy(logits[:, 4:-1].transpose(1, 2), labels[:, 4:], reduction="sum")
    return (head + rest) / (labels != -100).sum()


def loss_u(logits, input_ids, attention_mask):
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    keep = labels != -100
    p = torch.softmax(logits[:, :-1], -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(torch.log(p) * keep).sum() / keep.sum()


_MYSTERIES = {"P": loss_p, "Q": loss_q, "R": loss_r, "S": loss_s, "T": loss_t, "U": loss_u}
# the answers as answer_digest("name_the_bugs", letter, cause): the key does not give them away
_MYSTERY_KEY = {
    "P": "ebb7d0a7dfc7e621b9a8937184df4d7c4b263dcf961156c27d5ae6df5f21209e",
    "Q": "31133423d3bfd91bd22990973721c0523178f92fe1e084d2080aaba5b136aa97",
    "R": "632c4df98fb260a6d2a976527a28566f23c51e61cb9c68d1b1c26334e2139f65",
    "S": "cd428ed84c22b90181b2229c55d398d72436929f4addc09e65a35a792e6fa74f",
    "T": "872d70375f821331a1c58d75112841a9f25ca2f3733447d176ea5506096f7074",
    "U": "5d412e3d0b5f827a8358f098dd581490ff7afb230bd7f48a2dd17b88428667ed",
}


def mystery_pipelines(seed: int = 0) -> dict:
    """Six pipelines ``{letter: (forward, loss_fn)}`` on one fresh tiny GPT called the correct
    way (padding as its own document, positions from the mask); only the losses differ."""
    model = pipeline_gpt(seed)
    forward = lambda ids, mask: forward_with_mask(model, ids, mask)  # noqa: E731
    return {letter: (forward, loss) for letter, loss in _MYSTERIES.items()}


def show_mystery(letter: str) -> None:
    """Print the code of mystery ``letter``'s loss (PAD = 0, EOS = 1, as everywhere here)."""
    if letter not in _MYSTERIES:
        raise ValueError(f"letter must be one of {sorted(_MYSTERIES)}; got {letter!r}")
    print(inspect.getsource(_MYSTERIES[letter]).rstrip())


def mystery_report(letter: str, seed: int = 0):
    """``run_checks`` on mystery pipeline ``letter`` (PAD 0, EOS 1, as for every pipeline here)."""
    if letter not in _MYSTERIES:
        raise ValueError(f"letter must be one of {sorted(_MYSTERIES)}; got {letter!r}")
    forward, loss_fn = mystery_pipelines(seed)[letter]
    with cpu_threads(1):
        return run_checks(forward, loss_fn, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS)


_HINTS = {  # one question per mystery: a failure asks one of them, in turn (see check_mystery)
    "P": "its one failing row, padding_unscored, has two causes; take a row of three real tokens and "
    "one PAD, and go through the code: which of its targets end up -100?",
    "Q": "zero_logits fails; in a row of n real tokens, how many targets are there, and what does "
    "attention_mask.sum() count?",
    "R": "no row fails; line by line, which targets does keep select, and is the result a mean over "
    "exactly those?",
    "S": "eos_scored has two causes; are PAD and EOS one id here or two, and which ids does its loop "
    "turn into -100?",
    "T": "all_scored and equal_weights fail; which positions change the value but get no gradient, "
    "and which line decides that?",
    "U": "no row fails, as for R; the checklist's logits are moderate: what would this loss return "
    "for a target whose logit is 120 below another token's, in float32, and would R return the same?",
}

_FORBID_SEARCH = key_search_refused(
    "read each mystery's code and report instead", "lmcore.course.debugging.exercises.check_mystery"
)


def check_mystery(answers_fn):
    """Grade ``answers_fn() -> {letter: key of BUG_CHOICES}`` for the six mysteries.

    The key holds salted digests (:func:`lmcore.course.checks.answer_digest`, salted with the
    exercise's name and the letter), so reading it gives nothing away; with 17 choices a search
    over them would, so ``answers_fn`` may not hash (``answer_digest``, ``hashlib``) nor call
    this checker. A failure is no oracle: it says that not all six are right, never how many
    nor which (a count, or "P is wrong", lets a learner change one letter at a time until the
    line moves). The one question it adds is about the mystery whose turn it is, P on the first
    failure, Q on the second and so on: a rule that depends on the number of tries only, never on
    the answers, so it tells nothing about which is right, and six failures have asked about
    every mystery once. An answer that is not a key of BUG_CHOICES, or a missing letter, is
    named: that says nothing about the key either."""
    return check_choices(
        "name_the_bugs",
        answers_fn,
        _MYSTERY_KEY,
        _HINTS,
        choices=BUG_CHOICES,
        forbid=_FORBID_SEARCH,
        hint=(
            "For each mystery, which of run_checks' checks fail, and which causes does each failing "
            "check name? Which of those causes fits the code you see?",
            "a failing check narrows the causes, the code decides between them: padding_unscored "
            "asks on which side (input or target) the mask sets -100, zero_logits what a count "
            "counts, eos_scored whether PAD and EOS are one id, all_scored which positions the "
            "gradient never reaches; where no check fails, read the code line by line and ask what it "
            "does with logits far larger than the checklist's.",
        ),
    )


def _one_miss(margin: float) -> tuple:
    """One row of two real tokens whose one target's logit is ``margin`` below another token's
    (float32), as ``(logits, input_ids, attention_mask)``."""
    ids = torch.tensor([[2, 3]])
    logits = torch.zeros(1, 2, V)
    logits[0, 0, 4] = margin  # token 4 leads the target (3) by the margin
    return logits, ids, torch.ones_like(ids)


def show_underflow(margins=(20.0, 60.0, 120.0, 200.0)) -> dict:
    """The reveal after ``name_the_bugs``: R and U, which pass every row of the checklist, on one
    target whose logit is ``margin`` below another token's (float32). R's loss is the margin (plus
    ln(1 + 15 e^-margin), below 1e-7 here); U's softmax gives the target exactly 0 once ``e^-margin`` is below float32's
    smallest number, and log 0 = -inf makes the loss inf and its gradient nan. Prints a row per
    margin and the two verdicts; returns ``{margin: (R, U, U's gradient finite)}``."""
    out = {}
    print(f"{'margin':>7s} {'R':>9s} {'U':>9s}  U's gradient finite")
    for margin in margins:
        values = []
        for loss in (loss_r, loss_u):
            logits, ids, mask = _one_miss(margin)
            logits.requires_grad_(True)
            value = loss(logits, ids, mask)
            value.backward()
            values.append((value.item(), bool(torch.isfinite(logits.grad).all())))
        out[margin] = (values[0][0], values[1][0], values[1][1])
        print(f"{margin:7.0f} {values[0][0]:9.3f} {values[1][0]:9.3f}  {'yes' if values[1][1] else 'no'}")
    r_right = all(abs(r - m) < 1e-3 for m, (r, _, _) in out.items())
    u_breaks = [m for m, (_, u, finite) in out.items() if u == float("inf") and not finite]
    print(f"R's loss is the margin at every margin, to 0.001: {'yes' if r_right else 'NO'}")
    print(
        f"U's loss is inf and its gradient nan from margin {min(u_breaks, default=float('nan')):.0f} on: "
        f"{'yes' if u_breaks and u_breaks == [m for m in margins if m >= min(u_breaks)] else 'NO'}"
    )
    for dtype in (torch.float32, torch.float16):
        f = torch.finfo(dtype)
        print(f"{str(dtype):14s} the smallest number above 0 is e^{math.log(f.tiny * f.eps):.1f}")
    return out


PROMPT = 3  # completion-only: the first 3 tokens of each row are the prompt
Z_LOSS = 1e-4  # my_loss_fn's z-loss coefficient (PaLM's): Z_LOSS x mean (log Z)^2 over the scored positions


def prompt_tokens(input_ids, attention_mask):
    """True at the prompt tokens (the first PROMPT of each row): ``run_checks``'s ``unscored=``."""
    return torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids) < PROMPT


def _completion_labels(input_ids, attention_mask):
    # a label is -100 (not a target) where the token itself is prompt or padding, before the shift
    is_prompt = torch.arange(input_ids.shape[1], device=input_ids.device) < PROMPT
    return input_ids.masked_fill((attention_mask == 0) | is_prompt, -100)


def _completion_loss(logits, input_ids, attention_mask):
    labels = _completion_labels(input_ids, attention_mask)[:, 1:]
    # position t is scored against token t + 1; the mean runs over the targets left (ignore_index=-100)
    V = logits.shape[-1]
    nll = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels.reshape(-1))
    log_z = torch.logsumexp(logits[:, :-1], dim=-1)  # (N, L-1): log Z at each predicting position
    return nll + Z_LOSS * log_z[labels != -100].pow(2).mean()  # the z-loss where the loss scores


_NAME = {PAD: "PAD", EOS: "EOS"}


def show_completion_loss(seed: int = 3) -> None:
    """The reveal after ``my_loss_fn``'s check: two rows of the notebook's documents as the check's
    reference scores them, read from its gradient at zero logits (``token→target``, ``·`` where the
    position is not scored), and the weight of each target. Its code is not printed: a site built
    without solutions shows this cell's output too."""
    from .data import documents, padded_batch

    ids, mask = padded_batch(documents(2, seed=seed))
    weight, targets = gradient_reading(_completion_loss, ids, mask, V)
    show = lambda t: "·" if t < 0 else _NAME.get(t, str(t))  # noqa: E731
    for n in range(len(ids)):
        pairs = [f"{show(int(a))}→{show(int(b))}" for a, b in zip(ids[n], targets[n]) if int(a) != PAD]
        print(f"row {n}: " + "  ".join(pairs))
    scored = weight[weight > 0]
    print(
        f"{len(scored)} targets scored in the two rows, each with weight 1/{len(scored)} = "
        f"{1 / len(scored):.4f}: {'yes' if torch.allclose(scored, torch.tensor(1 / len(scored))) else 'NO'}"
    )


_G = "gradient at the case's logits"


def _reading(fn):
    """What the checker compares: each position's weight (from the gradient at zero logits), the
    loss at the case's logits, and its gradient there (where a z-loss's gradient shows: at zero
    logits it is uniform over the vocabulary, which the weights leave out)."""

    def read(logits, ids, mask):
        x = logits.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            value = fn(x, ids, mask)
        grad = torch.zeros_like(x)
        if isinstance(value, torch.Tensor) and value.requires_grad:
            (grad,) = torch.autograd.grad(value, x, allow_unused=True)
            grad = torch.zeros_like(x) if grad is None else grad
        weight = gradient_reading(fn, ids, mask, logits.shape[-1])[0]
        value = value.detach() if isinstance(value, torch.Tensor) else value
        return {"weight of each position's logits": weight.detach(), "loss": value, _G: grad.detach()}

    read.loss_fn = fn  # what explain_loss reads the targets of
    return read


def _loss_cases():
    """Ragged right-padded batches. Two add a common offset to the logits of the positions the
    loss does not score (30: it moves log Z, not the probabilities), one to every position (100:
    log of a float32 sum of exps overflows, logsumexp does not)."""
    g = torch.Generator().manual_seed(7)
    cases = []
    shapes = [(2, 8, 6, 6, 30.0, "unscored"), (3, 9, 7, 5, 0.0, ""), (1, 6, 5, 6, 100.0, "every")]
    shapes += [(4, 10, 11, 4, 30.0, "unscored")]
    for n, length, vocab, short, offset, where in shapes:
        ids = torch.randint(2, vocab, (n, length), generator=g)
        lengths = torch.tensor([length] + [short] * (n - 1))
        mask = (torch.arange(length)[None] < lengths[:, None]).long()
        ids = ids.masked_fill(mask == 0, PAD)
        ids[torch.arange(n), lengths - 1] = EOS  # every completion ends with EOS, as the spec says
        logits = 2 * torch.randn(n, length, vocab, generator=g)
        label = f"N={n}, L={length}, V={vocab}, rows of {lengths.tolist()} tokens"
        if where:
            scored = torch.zeros(n, length, dtype=torch.bool)
            scored[:, :-1] = _completion_labels(ids, mask)[:, 1:] != -100
            logits += offset * (~scored if where == "unscored" else torch.ones_like(scored))[..., None]
            label += f", logits +{offset:g} at {'the positions not scored' if where == 'unscored' else 'every position'}"
        cases.append(Case((logits, ids, mask), label=label))
    return cases


_W = "weight of each position's logits"


def explain_loss(fn, case, expected, got) -> str:
    """What a wrong ``my_loss_fn`` broke on the failing case, as a question about one position
    (``""`` when it cannot tell; the checker's nudge comes then). It reads the answer's weights
    (``got``) and, from its gradient at zero logits, the token each position is scored against:
    a position scored that should not be (padding, a row's last real token, its own token, a
    prompt token as target), then a completion target left out, then the weights (rows weighed
    differently, or every target scaled alike: a sum, another count, rescaled logits)."""
    logits, ids, mask = case.args
    if isinstance(got.get("loss"), (torch.Tensor, float)) and not math.isfinite(float(got["loss"])):
        return (
            f"your loss is {float(got['loss'])} on this batch ({case.label}): which step of yours "
            "makes an inf or a nan out of large logits in float32?"
        )
    want, have = expected[_W].double(), torch.as_tensor(got[_W]).double()
    if have.shape != want.shape:
        return ""
    if not (have.abs() > 1e-6).any():
        return (
            "no position's logits get any gradient from your loss: does its value reach the logits "
            "through operations autograd follows (no .item(), no .detach(), no torch.no_grad)?"
        )
    _, target = gradient_reading(getattr(fn, "loss_fn", fn), ids.clone(), mask.clone(), logits.shape[-1])
    return (
        _scored_wrongly(ids, mask, want, have, target)
        or _cut_from_the_graph(want, have, expected["loss"], got["loss"])
        or _left_out(ids, want, have)
        or _weighed_wrongly(mask, want, have)
        or _z_loss_wrongly(case, want, have, got["loss"])
        or _z_loss_detached(want, have, expected, got)
        or _valued_wrongly(want, have, expected["loss"], got["loss"])
    )


def _scored_wrongly(ids, mask, want, have, target) -> str:
    """The first position the answer scores that it should not, or against the wrong token."""
    n_real = mask.sum(1)
    for n, t in (have.abs() > 1e-6).nonzero().tolist():
        if want[n, t] != 0 and int(target[n, t]) == int(ids[n, t + 1]):
            continue
        if mask[n, t] == 0:
            return (
                f"row {n}, position {t} is padding, and your loss grades a prediction made there: "
                "should the model be scored at padding?"
            )
        if t == int(n_real[n]) - 1:
            return (
                f"row {n}, position {t} holds the row's last real token, and your loss grades the "
                "prediction made there: which token comes after it, and is it part of the completion?"
            )
        if int(target[n, t]) == int(ids[n, t]) and int(ids[n, t]) != int(ids[n, t + 1]):
            return (
                f"row {n}, position {t} is graded on predicting token {int(ids[n, t])}, the token it "
                f"already holds: which token should the prediction made at position {t} be graded against?"
            )
        if int(target[n, t]) != int(ids[n, t + 1]):
            return (
                f"row {n}, position {t} is graded on predicting token {int(target[n, t])}, not the "
                f"token after it ({int(ids[n, t + 1])}): which pairing do your labels and logits make?"
            )
        if t + 1 < PROMPT:
            return (
                f"row {n}: the token after position {t} belongs to the prompt, and your loss grades "
                "the model on predicting it: should the model learn to write the prompt?"
            )
    return ""


def _cut_from_the_graph(want, have, expected_loss, got_loss) -> str:
    """The value is right but a completion target gets no gradient: it is counted, then detached."""
    if abs(float(got_loss) - float(expected_loss)) > 1e-6 * max(1.0, abs(float(expected_loss))):
        return ""
    for n, t in ((want != 0) & (have.abs() <= 1e-6)).nonzero().tolist():
        return (
            f"row {n}: your loss's value is right, but the prediction made at position {t} gets no "
            "gradient from it: which operation counts it in the value and cuts it from the graph?"
        )
    return ""


def _left_out(ids, want, have) -> str:
    """The first completion target the answer gives no weight."""
    for n, t in ((want != 0) & (have.abs() <= 1e-6)).nonzero().tolist():
        if int(ids[n, t + 1]) == EOS:
            return (
                f"row {n}: the token after position {t} is the EOS that ends the completion, and your "
                "loss gives that prediction no weight: how would the model learn when to stop writing?"
            )
        if t == PROMPT - 1:
            return (
                f"row {n}, position {t} is the prompt's last token; the token after it is the first of "
                "the completion: does your loss ever grade the model on writing that token?"
            )
        return (
            f"row {n}: the token after position {t} is part of the completion, and your loss gives the "
            f"prediction made at position {t} no weight: which line leaves it out?"
        )
    return ""


def _weighed_wrongly(mask, want, have) -> str:
    """The right positions with the wrong weights: rows weighed differently, or every target
    scaled alike (by the number of targets, by one over the real tokens, by anything else)."""
    scored = want != 0
    first = {n: float(have[n][scored[n]][0]) for n in range(len(want)) if scored[n].any()}
    for a, b in itertools.combinations(first, 2):
        if abs(first[a] - first[b]) > 1e-6:
            return (
                f"each target of row {a} weighs {first[a]:.4g} and each of row {b} {first[b]:.4g}: "
                "does every completion token weigh the same, however long its row?"
            )
    w = next(iter(first.values()))
    ratio, count = w / float(want[scored][0]), int(scored.sum())
    if abs(ratio - count) < 1e-3 * count:
        return (
            "every completion token gets the same weight, but your loss grows with their number: "
            "what value should all-zero logits (a uniform guess) give a per-token loss?"
        )
    if ratio < 1 and abs(1 / w - float(mask.sum())) < 1e-3:
        every = int(mask.sum()) == mask.numel()  # no padding in this batch: positions = real tokens
        counted = "positions (every one a real token here)" if every else "real tokens"
        return (
            f"each target weighs 1/{int(mask.sum())}, one over the batch's {counted}: how many of "
            "those tokens are targets?"
        )
    divisor = 1 / w  # a whole number near the count of targets: a count of something else
    if count < round(divisor) < 2 * count and abs(divisor - round(divisor)) < 1e-3 * divisor:
        return (
            f"each target weighs 1/{round(divisor)}, and the batch has {count} completion targets: "
            "what does your loss divide by?"
        )
    if abs(ratio - 1) > 1e-3:
        return (
            f"the right positions, each with {ratio:.3g}x the weight it should have: is anything "
            "done to the logits or to the loss between the model's raw scores and its value?"
        )
    return ""


def _z_loss_wrongly(case, want, have, got_loss) -> str:
    """Every weight right (a z-loss adds only a uniform part at zero logits, which the reading
    removes) and the value one of the z-loss's plausible mistakes: none, over other positions
    (every one, every real token, the completion tokens' own), a sum, or log Z not squared."""
    if not torch.allclose(have, want, rtol=1e-2, atol=1e-4) or not isinstance(
        got_loss, (torch.Tensor, float)
    ):
        return ""
    logits, ids, mask = case.args
    labels = _completion_labels(ids, mask)[:, 1:]
    scored = torch.zeros(ids.shape, dtype=torch.bool)
    scored[:, :-1] = labels != -100  # the positions whose prediction the loss scores
    nll = F.cross_entropy(logits[:, :-1].double().reshape(-1, logits.shape[-1]), labels.reshape(-1))
    log_z = torch.logsumexp(logits.double(), -1)  # (N, L)
    got = float(got_loss)
    near = lambda value: abs(got - float(value)) < 1e-6 + 1e-5 * abs(float(value))  # noqa: E731
    if near(nll):
        return "your value is the mean NLL alone: what does the exercise add to it, and where?"
    own_tokens = (mask == 1) & (torch.arange(ids.shape[1]) >= PROMPT)  # the completion's own positions
    before_last = torch.zeros_like(scored)
    before_last[:, :-1] = True  # the positions that predict a next token
    sets = (torch.ones_like(scored), mask == 1, own_tokens)
    for where in (*sets, *(w & before_last for w in sets)):
        if near(nll + Z_LOSS * log_z[where].pow(2).mean()):
            n, t = (int(v) for v in (where ^ scored).nonzero()[0])
            seen = "counts" if where[n, t] else "leaves out"
            return (
                f"row {n}, position {t}: your z-loss {seen} its log Z, and the loss "
                f"{'does not score' if where[n, t] else 'scores'} the prediction made there: which "
                "positions' log Z should the penalty see?"
            )
    if near(nll + Z_LOSS * log_z[scored].pow(2).sum()):
        return "your z-loss grows with the number of scored positions: is the penalty a sum or a mean?"
    z_right = float(Z_LOSS * log_z[scored].pow(2).mean())
    k = (got - float(nll)) / z_right if z_right else 0.0
    if abs(k - round(k, 1)) < 1e-3 * max(1.0, abs(k)) and abs(k - 1) > 0.05 and k > 0:
        return (
            f"your loss minus the mean NLL is {k:.3g} times the z-loss the exercise asks for, over "
            "the right positions: which coefficient multiplies the mean of (log Z)^2?"
        )
    if near(nll + Z_LOSS * log_z[scored].mean()):
        return "your z-loss grows in step with log Z: which power of log Z does the exercise penalise?"
    return ""


def _z_loss_detached(want, have, expected, got) -> str:
    """Every weight and the value right, the gradient at the case's logits not: a term autograd
    does not see (a z-loss computed on detached logits, or under no_grad)."""
    if not torch.allclose(have, want, rtol=1e-2, atol=1e-4) or _G not in got:
        return ""
    same_value = abs(float(got["loss"]) - float(expected["loss"])) < 1e-5 * max(
        1.0, abs(float(expected["loss"]))
    )
    if same_value and not torch.allclose(torch.as_tensor(got[_G]).double(), expected[_G].double(), atol=1e-6):
        return (
            "your loss has the right value and the right weights, but not the right gradient at these "
            "logits: which part of the value does autograd not follow back to the logits?"
        )
    return ""


def _valued_wrongly(want, have, want_loss, got_loss) -> str:
    """Every weight right and the value not: something added to the mean NLL, or lost to rounding."""
    if not torch.allclose(have, want, rtol=1e-2, atol=1e-4) or not isinstance(
        got_loss, (torch.Tensor, float, int)
    ):
        return ""
    off = float(got_loss) - float(want_loss)
    exact = "" if torch.allclose(have, want, atol=1e-5) else " up to rounding"
    if abs(off) < 1e-7:
        return (
            "every position has the right weight up to rounding: in which precision does your loss compute?"
        )
    return (
        f"every position has the right weight{exact}, yet your loss is {abs(off):.2g} "
        f"{'above' if off > 0 else 'below'} the reference: what does your loss compute besides the "
        "mean NLL and the z-loss, and in which precision?"
    )


_FORBID = {
    "lmcore.loss.causal_lm_loss": "write it with torch.nn.functional.cross_entropy, not lmcore's loss",
    "lmcore.loss.chunked_causal_lm_loss": "write it with torch.nn.functional.cross_entropy",
    "lmcore.course.debugging.losses.loss_correct": "write it with torch.nn.functional.cross_entropy",
    "lmcore.course.debugging.exercises._completion_loss": "that is the check's reference: write it yourself",
}


@when_grading
def check_loss_fn(fn):
    """Grade a completion-only ``fn(logits, input_ids, attention_mask) -> scalar`` with its z-loss:
    the weight of every position (first differing position named) and the value, against a hidden
    reference, lmcore's loss forbidden; then ``run_checks`` with ``unscored=prompt_tokens`` and
    ``z_loss=Z_LOSS``."""
    result = check(
        "my_loss_fn",
        _reading(fn),
        _reading(_completion_loss),
        _loss_cases(),
        atol=1e-5,
        forbid=_FORBID,
        explain=explain_loss,
        hint=(
            "Which positions should be scored: is the token after each one a real token after the "
            "prompt? Does every scored position weigh the same? And which positions' log Z does the "
            "z-loss see?",
            "labels = input_ids with -100 where attention_mask is 0 or the token is among the first "
            "PROMPT; then logits[:, :-1] against labels[:, 1:], a mean over the targets left; plus "
            "Z_LOSS times the mean of torch.logsumexp(logits[:, :-1], -1) ** 2 over the same targets.",
        ),
    )
    if not result:
        return result
    model = pipeline_gpt(0)
    with cpu_threads(1):
        report = run_checks(
            lambda ids, mask: forward_with_mask(model, ids, mask),
            fn,
            vocab_size=V,
            seq_len=L,
            pad_id=PAD,
            eos_id=EOS,
            unscored=prompt_tokens,
            z_loss=Z_LOSS,
        )
    print(
        f"{'✓' if report.passed else '✗'} run_checks(..., unscored=prompt_tokens, z_loss=Z_LOSS) on your loss: "
        f"{str(report).splitlines()[0]}"
    )
    return result if report.passed else CheckResult(False, str(report).splitlines()[0])
