"""Notebook 04, section 6: what the first loss (step 0, no training) can and cannot see. Broken
pipelines that start on ln V anyway (a shift by 2, "target = previous token", an untied model
scored on its own input, a causal mask one token too wide), the one leak that shows (target = own
input with tied embeddings), and an honest pipeline on text that repeats its current token,
which starts below ln V by the law of :func:`predict_with_repeats` (Exercise 4's reference); and
Exercise 3, a prediction of which broken pipelines a short run on random tokens exposes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..._validate import require_int_scalar
from ...loss import causal_lm_loss
from ...train.devices import cpu_threads
from ..checks import Case, check, check_choices, key_search_refused, only_match
from ..toys import fit, toy_gpt
from .lesson import predict_from_logits

__all__ = [
    "repeating_tokens",
    "own_token_lift",
    "predict_with_repeats",
    "step0_losses",
    "repeat_first_loss",
    "losses_after_training",
    "pipelines",
    "BROKEN",
    "SHORT_RUN_CHOICES",
    "short_run_verdicts",
    "check_short_run",
    "check_predict_with_repeats",
]


def repeating_tokens(vocab_size: int, q: float, batch: int, length: int, *, seed: int = 0) -> torch.Tensor:
    """(batch, length) ids: each token repeats the one before it with probability ``q``, else is
    drawn uniformly from all ``vocab_size`` (real text repeats too: letters, spaces, indents)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1]; got {q!r}.")
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(vocab_size, (batch, length), generator=g)
    repeat = torch.rand(batch, length, generator=g) < q
    for t in range(1, length):
        ids[:, t] = torch.where(repeat[:, t], ids[:, t - 1], ids[:, t])
    return ids


def own_token_lift(logits: torch.Tensor, input_ids: torch.Tensor) -> float:
    """Mean over positions of (the logit of the token the position reads) - (the row's mean
    logit): what a tied embedding adds to a fresh model's own-token logit."""
    if logits.shape[:-1] != input_ids.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and input_ids {tuple(input_ids.shape)} do not match.")
    z = logits.detach().double()
    own = z.gather(-1, input_ids[..., None])[..., 0]
    return float((own - z.mean(-1)).mean())


def predict_with_repeats(logits: torch.Tensor, input_ids: torch.Tensor, q: float) -> float:
    """Reference of Exercise 3: the expected first loss when a fraction ``q`` of the targets is
    the position's own input token and the rest are independent of the logits:
    ln V + sigma^2/2 (:func:`~lmcore.course.anchor.lesson.predict_from_logits`) - q * lift
    (:func:`own_token_lift`)."""
    return predict_from_logits(logits) - q * own_token_lift(logits, input_ids)


def _exact_with_repeats(logits: torch.Tensor, input_ids: torch.Tensor, q: float) -> float:
    """The mean first loss the law approximates, computed exactly: per position, with weight
    ``q`` the loss of its own input token, else the mean loss over the whole vocabulary."""
    z = logits.detach().double()
    lse = torch.logsumexp(z, -1)
    own = z.gather(-1, input_ids[..., None])[..., 0]
    return float((q * (lse - own) + (1 - q) * (lse - z.mean(-1))).mean())


@torch.no_grad()
def step0_losses(vocab_size: int = 65, n_embd: int = 32, *, seed: int = 0) -> dict:
    """The first loss of a fresh lmcore GPT, no step taken, under seven pipelines on 16 rows of
    32 tokens: random tokens unless said. Returns {name: loss} and "ln V"."""
    V, L = vocab_size, 32
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(V, (16, L + 2), generator=g)  # two spare tokens for the shifted variants
    tied = toy_gpt(V, block_size=L + 2, n_embd=n_embd, seed=seed)
    untied = toy_gpt(V, block_size=L + 2, n_embd=n_embd, seed=seed)
    untied.lm_head = torch.nn.Linear(n_embd, V, bias=False)
    torch.nn.init.normal_(untied.lm_head.weight, std=0.02)

    with cpu_threads(1):
        out = {"ln V": math.log(V)}
        for name, (is_tied, loss) in pipelines(L).items():  # the pipelines the short run trains
            out[name] = float(loss(tied if is_tied else untied, x))
        rep = repeating_tokens(V, 0.5, 16, L + 1, seed=seed + 1)
        out["honest, on text repeating its token half the time"] = float(causal_lm_loss(tied(rep), rep))
        return out


def pipelines(L: int) -> dict:
    """name -> (tied?, loss(model, x)) for a batch ``x`` of random tokens, shape (N, L + 2): the
    pipelines :func:`step0_losses` scores before any step and :func:`losses_after_training` trains."""

    def ce(logits, targets):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    wide = torch.ones(L, L, dtype=torch.bool).tril(1)  # query t may read keys up to t + 1
    return {
        "honest (target = next token)": (True, lambda m, x: ce(m(x[:, :L]), x[:, 1 : L + 1])),
        "shift by 2 (target = token t+2)": (True, lambda m, x: ce(m(x[:, :L]), x[:, 2 : L + 2])),
        "target = previous token": (True, lambda m, x: ce(m(x[:, :L])[:, 1:], x[:, : L - 1])),
        "target = own input, untied output matrix": (False, lambda m, x: ce(m(x[:, :L]), x[:, :L])),
        "causal mask one token too wide (t reads t+1)": (
            True,
            lambda m, x: ce(m(x[:, :L], attention=wide), x[:, 1 : L + 1]),
        ),
        "target = own input, tied (no shift)": (True, lambda m, x: ce(m(x[:, :L]), x[:, :L])),
    }


def losses_after_training(steps: int = 60, vocab_size: int = 65, n_embd: int = 32, *, seed: int = 0) -> dict:
    """Each pipeline of :func:`step0_losses` (random tokens) trained for ``steps`` AdamW steps,
    a fresh batch of 16 rows of 32 tokens each step, then scored on a held-out batch: {name:
    loss} and "ln V". On random tokens nothing is learnable, so a pipeline whose loss falls below
    ln V reads its target from its input; one that stays there does not."""
    require_int_scalar("steps", steps, min=1)
    require_int_scalar("vocab_size", vocab_size, min=2)
    require_int_scalar("n_embd", n_embd, min=1)
    V, L = vocab_size, 32

    def batch(k: int) -> torch.Tensor:
        return torch.randint(V, (16, L + 2), generator=torch.Generator().manual_seed(seed * 100_003 + k))

    held_out = batch(-1)
    out = {"ln V": math.log(V)}
    for name, (tied, loss) in pipelines(L).items():
        model = toy_gpt(V, block_size=L + 2, n_embd=n_embd, seed=seed)
        if not tied:
            model.lm_head = torch.nn.Linear(n_embd, V, bias=False)
            torch.nn.init.normal_(
                model.lm_head.weight, std=0.02, generator=torch.Generator().manual_seed(seed)
            )
        fit(model, batch, steps=steps, lr=1e-2, loss_fn=loss)
        model.eval()
        with torch.no_grad(), cpu_threads(1):
            out[name] = float(loss(model, held_out))
    return out


@torch.no_grad()
def repeat_first_loss(
    vocab_size: int, q: float, *, n_embd: int = 32, final_gain: float | None = None, seed: int = 0
) -> dict:
    """An honest (shifted) first loss of a fresh tied GPT on :func:`repeating_tokens`, with the
    measured fraction of targets equal to their position's input, the lift and the prediction."""
    model = toy_gpt(
        vocab_size,
        block_size=64,
        n_embd=n_embd,
        n_head=max(1, n_embd // 64) if n_embd % 64 == 0 else 2,
        seed=seed,
    )
    if final_gain is not None:
        torch.nn.init.constant_(model.ln_f.weight, float(final_gain))
    ids = repeating_tokens(vocab_size, q, 8, 64, seed=seed + 1)
    with cpu_threads(1):
        logits = model(ids)
    q_seen = float((ids[:, 1:] == ids[:, :-1]).double().mean())
    return {
        "loss": float(causal_lm_loss(logits, ids)),
        "ln_v": math.log(vocab_size),
        "q_seen": q_seen,
        "lift": own_token_lift(logits[:, :-1], ids[:, :-1]),
        "predicted": predict_with_repeats(logits[:, :-1], ids[:, :-1], q_seen),
    }


def _repeat_cases() -> list[Case]:
    g, cases = torch.Generator().manual_seed(21), []
    for (N, L, V), s, lift, q in (
        ((2, 6, 500), 0.1, 0.3, 0.5),
        ((1, 9, 2000), 0.5, 1.2, 0.25),
        ((3, 4, 1000), 1.0, 0.8, 0.0),
        ((2, 5, 800), 0.3, 0.6, 1.0),
    ):
        ids = torch.randint(V, (N, L), generator=g)
        z = s * torch.randn(N, L, V, generator=g) + 3.0 * torch.randn(N, L, 1, generator=g)
        z = z + lift * F.one_hot(ids, V)  # each position's own token raised
        cases.append(
            Case(
                (z, ids, q),
                label=f"logits {(N, L, V)}, spread {s}, own token raised by {lift}, a constant per position, q = {q}",
            )
        )
    return cases


_NO_REFERENCE = {
    f"lmcore.course.anchor.{m}": "that is the course's reference: write it yourself"
    for m in (
        "step0.predict_with_repeats",
        "step0.own_token_lift",
        "lesson.predict_from_logits",
        "lesson.logit_sigma",
        "lesson.expected_first_loss",
        "step0._exact_with_repeats",
    )
}


def _repeat_mistakes(
    z: torch.Tensor, ids: torch.Tensor, q: float, got: float | None = None
) -> list[tuple[float, float, str]]:
    """(the value a plausible mistake gives on logits ``z`` (N, L, V), input ids and q, how near a
    result must come to it, the question it gets, which may quote the learner's value ``got``): q
    left out, the repeats' effect added, every target a repeat, the own logit not centred, the
    spread over the whole tensor or around 0, the next token's logit read, and the random-token
    law charged to the non-repeats only."""
    z = z.detach().double()
    V, law, lift = z.shape[-1], predict_from_logits(z), own_token_lift(z, ids)
    ln_v, away = math.log(V), (law + q * lift if got is None else got) - law
    counted = (
        "your spread counts the constant each position adds to all of its logits: does adding one "
        "constant to every logit of a position change what softmax gives, or the loss?"
    )
    next_token = (
        "your lift reads, at each position, the logit of the token after the one the position reads: "
        "when the target repeats, which token is it?"
    )
    return [
        (
            law,
            2e-3,
            f"your value is section 3's law for random tokens, as if q were 0; here q = {q:g}: how often is "
            "the target the token the position reads, and what does that token's raised logit do to the loss?",
        ),
        (
            law + q * lift,
            2e-3 + 0.05 * abs(q * lift),
            f"your value lies {away:+.3f} nats from the law for random tokens: does a target whose logit "
            "is raised make the loss larger or smaller?",
        ),
        (
            law - lift,
            1e-3,
            f"your value counts every target as a repeat, as if q were 1; here q = {q:g}: how often is the "
            "target the token the position reads?",
        ),
        (
            law - q * float(z.gather(-1, ids[..., None]).mean()),
            1e-3,
            "your lift moves with the constant each position adds to all of its logits: does that constant "
            "change how far the own token's logit stands above the rest of its row?",
        ),
        (ln_v + float(z.var(unbiased=False)) / 2 - q * lift, 1e-3, counted),
        (ln_v + float(z.pow(2).mean()) / 2 - q * lift, 1e-3, counted),
        (law - q * own_token_lift(z, ids.roll(-1, dims=1)), 1e-3, next_token),
        (law - q * own_token_lift(z[:, :-1], ids[:, 1:]), 1e-3, next_token),
        (
            (1 - q) * law - q * lift,
            1e-3,
            "your value lies far below ln V, as if a repeated target cost only what its raised logit takes "
            "away: what does such a target still pay for the rest of the vocabulary?",
        ),
    ]


def _explain_repeats(fn, case, expected, got) -> str:
    """The mistake whose value on this case the learner's matches, as a question; ``""`` unless
    exactly one does (mistakes that change nothing on this case, e.g. q left out when q = 0,
    left out)."""
    z, ids, q = case.args
    try:
        g = float(got)
    except (TypeError, ValueError, RuntimeError):
        return ""
    e = float(expected)
    named = {
        question
        for value, tol, question in _repeat_mistakes(z, ids, q, g)
        if abs(g - value) < tol and abs(e - value) >= tol
    }
    return only_match(named)


def check_predict_with_repeats(fn, quiet: bool = False):
    """Grade ``fn(logits (N, L, V), input_ids (N, L), q) -> expected first loss (nats)`` when a
    fraction q of the targets equals the position's own input token."""
    return check(
        "first_loss_with_repeats",
        fn,
        predict_with_repeats,
        _repeat_cases(),
        forbid=_NO_REFERENCE,
        quiet=quiet,
        explain=_explain_repeats,
        # the law is an approximation: 0.002 around it (measuring the lift or sigma over the other
        # V - 1 logits moves it by O(1/V)), plus its own error on the case (its distance from the
        # exact mean loss, repeats included), so the exact mean loss passes too
        atol=lambda z, ids, q: 2e-3 + abs(predict_with_repeats(z, ids, q) - _exact_with_repeats(z, ids, q)),
        rtol=0,
        hint=(
            "The loss at a position is the target's logit against all the logits of its row. How "
            "often is the target the repeated token, and how does its logit compare with the rest of "
            "the row then, and otherwise?",
            "the loss is logsumexp(z) - z_target; with probability q the target's logit is the "
            "own token's, otherwise it averages to the row mean. Measure each against its row's mean.",
        ),
    )


# ---------------------------------------------------------------- Exercise 3: what a short run exposes

BROKEN = (
    "shift by 2 (target = token t+2)",
    "target = previous token",
    "target = own input, untied output matrix",
    "causal mask one token too wide (t reads t+1)",
)
SHORT_RUN_CHOICES = ("on ln 65", "far below")
_FAR = 1.0  # "far below": the held-out loss ends more than this many nats below ln V
_NEAR = 0.05  # "on ln V": within this of it


def short_run_verdicts(steps: int = 60, *, seed: int = 0) -> dict:
    """For each of :data:`BROKEN`, what :func:`losses_after_training` shows: ``"far below"`` (more
    than 1 nat below ln V), ``"on ln 65"`` (within 0.05 of it), or ``"between"``."""
    losses = losses_after_training(steps, seed=seed)
    lnv = losses["ln V"]

    def verdict(loss):
        return "far below" if loss < lnv - _FAR else "on ln 65" if abs(loss - lnv) < _NEAR else "between"

    return {name: verdict(losses[name]) for name in BROKEN}


_SHORT_RUN = "short_run_prediction"
_SHORT_RUN_KEY = {
    "shift by 2 (target = token t+2)": "b6b9ea94852fd4a59bfb61502a7dccf816448910aa58eb4aae4af1b27ca52151",
    "target = previous token": "4c3b998f104b6ff97a85fdcbda9b8eebdb559d15ab636e053f990252729075cc",
    "target = own input, untied output matrix": "e022d20d5a8fe5d82a75b063edcc873047ad586341b39dcd0308120d1bc32097",
    "causal mask one token too wide (t reads t+1)": "428d30dc61ab1e764e4637656edcdfcf0ba7d840493d222ea5c3a226361feb34",
}
_SHORT_RUN_HINTS = {
    "shift by 2 (target = token t+2)": "position t reads the tokens up to t. Is the token at t + 2 among "
    "them, and what can training learn about a random token that no position reads?",
    "target = previous token": "position t is scored on the token at t - 1. Which tokens does position t "
    "read, and is that one among them?",
    "target = own input, untied output matrix": "the untied matrix starts without the tied one's raised "
    "own-token logit. Is the raise the only way a model can come to output the token it reads?",
    "causal mask one token too wide (t reads t+1)": "with the mask one token too wide, which tokens can position t "
    "read, and where among them is its target?",
}
_NO_RUN = (
    "that runs the experiment the exercise asks you to predict: decide first, the run comes after the check"
)
_SHORT_RUN_FORBID = key_search_refused(
    "decide from the pipelines' code instead", "lmcore.course.anchor.step0.check_short_run"
) | {
    "lmcore.course.anchor.step0.losses_after_training": _NO_RUN,
    "lmcore.course.anchor.step0.short_run_verdicts": _NO_RUN,
    "lmcore.course.toys.fit": _NO_RUN,
}


def _as_choice(answer):
    """A choice written with other capitals or spaces (``"Far below "``) as the choice; anything
    else as it is, for the check to name."""
    return " ".join(answer.lower().split()) if isinstance(answer, str) else answer


def check_short_run(fn) -> bool:
    """Grade ``short_run_prediction() -> {pipeline: "on ln 65" | "far below"}`` for each of :data:`BROKEN`: where its
    held-out loss ends after 60 AdamW steps on random tokens. As for every ``check_choices``
    exercise, a failure says only that not all four are right."""

    return check_choices(
        _SHORT_RUN,
        fn,
        _SHORT_RUN_KEY,
        _SHORT_RUN_HINTS,
        choices=SHORT_RUN_CHOICES,
        forbid=_SHORT_RUN_FORBID,
        as_answer=_as_choice,
        hint=(
            "On random tokens nothing is learnable, except what a position can read. For each pipeline, "
            "list the tokens position t reads and find its target: is it among them?",
            "far below: target = previous token, own input (tied or not), a mask one token too wide, each of which "
            "reads its target; on ln 65: shift by 2, whose target (t + 2) no position t reads: a "
            "misalignment, not a leak.",
        ),
    )
