"""Notebook 10, section 3: the price of one direction and the architecture map.

The same tiny GPT blocks trained two ways on one small corpus in which the animal is fixed by
the place that comes *after* it (``the cat sat on the mat``, ``the dog sat on the rug``, ...):
left to right (the causal LM of the whole course) and as a masked fill-in with the causal mask
removed (each row has one word replaced by ``<unk>``, the blank, and only that word is scored,
BERT's objective). The corpus also holds every sentence in the inverted order
(``on the mat sat the cat``), which lets a causal model answer "which animal?" when the question is
written as a prefix and scored over the label tokens, with no task head.
"""

from __future__ import annotations

import torch

from ...model import GPT
from ...shift import IGNORE_INDEX
from ..toys import WordTokenizer, fit, forward_without_causal_mask, toy_gpt

__all__ = [
    "PAIRS",
    "FILL_CORPUS",
    "WORDS",
    "UNK",
    "encode",
    "VISIBILITY_KINDS",
    "train_left_to_right",
    "train_fill_in",
    "direction_summary",
    "word_loss",
    "label_probabilities",
    "visibility",
    "format_visibility",
]

PAIRS = (("cat", "mat"), ("dog", "rug"), ("bird", "tree"), ("fish", "box"))
FILL_CORPUS = tuple(f"the {a} sat on the {p}" for a, p in PAIRS) + tuple(
    f"on the {p} sat the {a}" for a, p in PAIRS
)
VISIBILITY_KINDS = ("encoder", "decoder", "encoder-decoder")
_TOKENIZER = WordTokenizer(
    ("<unk>", "the", "sat", "on") + tuple(w for pair in PAIRS for w in pair),
    bos=True,
    unk="<unk>",
    specials=("<pad>", "<eos>", "<bos>"),
)
WORDS = _TOKENIZER.VOCAB  # <pad> 0, <eos> 1, <bos> 2, <unk> 3, then the corpus's words
UNK = _TOKENIZER.stoi["<unk>"]


def encode(text: str) -> torch.Tensor:
    """Token ids (1, L) of ``<bos> text`` in :data:`WORDS` (a word outside it becomes ``<unk>``)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}.")
    return torch.tensor([[_TOKENIZER.bos_id] + _TOKENIZER.encode(text.lower())])


def _rows() -> torch.Tensor:
    """FILL_CORPUS as ids (rows, 7): <bos> and six words each."""
    return torch.cat([encode(s) for s in FILL_CORPUS])


def train_left_to_right(steps: int = 300, seed: int = 0) -> GPT:
    """A 1-layer GPT trained as a causal LM (every next word a target) on :data:`FILL_CORPUS`."""
    ids = _rows()
    model = toy_gpt(len(WORDS), block_size=8, n_embd=32, seed=seed)
    fit(model, lambda step: ids, steps=steps, lr=1e-2)
    return model


def _blanked() -> tuple[torch.Tensor, torch.Tensor]:
    """Every word of every row blanked once: inputs with ``<unk>`` at the blank, labels -100
    except at the blank (no shift: the answer is the word at that position)."""
    ids = _rows()
    inputs, labels = [], []
    for row in ids:
        for t in range(1, row.numel()):
            x, y = row.clone(), torch.full_like(row, IGNORE_INDEX)
            x[t], y[t] = UNK, row[t]
            inputs.append(x)
            labels.append(y)
    return torch.stack(inputs), torch.stack(labels)


def _fill_in_loss(model, batch):
    inputs, labels = batch
    logits = forward_without_causal_mask(model, inputs)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def train_fill_in(steps: int = 300, seed: int = 0) -> GPT:
    """The same GPT (same size, same seed) trained as a masked fill-in without the causal mask:
    each row of :data:`FILL_CORPUS` with one word replaced by ``<unk>``, scored at that word only."""
    batch = _blanked()
    model = toy_gpt(len(WORDS), block_size=8, n_embd=32, seed=seed)
    fit(model, lambda step: batch, steps=steps, lr=1e-2, loss_fn=_fill_in_loss)
    return model


def direction_summary(steps: int = 300, seed: int = 0) -> dict[str, float]:
    """Both models trained from ``seed``, measured: the mean loss of the animal left to right and
    filled in, of the place left to right (over the four forward sentences), and the smallest
    probability the left-to-right model gives the right animal over the four prefix prompts
    (``on the <place> sat the``, renormalised over the four animals)."""
    left, fill = train_left_to_right(steps, seed), train_fill_in(steps, seed)
    sentences = [f"the {a} sat on the {p}" for a, p in PAIRS]
    animals = [a for a, _ in PAIRS]
    return {
        "animal, left to right": sum(word_loss(left, s, 2, bidirectional=False) for s in sentences) / 4,
        "animal, fill-in": sum(word_loss(fill, s, 2, bidirectional=True) for s in sentences) / 4,
        "place, left to right": sum(word_loss(left, s, 6, bidirectional=False) for s in sentences) / 4,
        "smallest p(right animal)": min(
            label_probabilities(left, f"on the {p} sat the", animals)[a] for a, p in PAIRS
        ),
    }


@torch.no_grad()
def word_loss(model: GPT, sentence: str, position: int, *, bidirectional: bool) -> float:
    """The loss (nats) of word ``position`` of ``<bos> sentence`` (1 = the first word).

    Left to right, it is predicted from the words before it (the logits one position earlier);
    ``bidirectional``, the word is replaced by ``<unk>`` and predicted at its own position by the
    model without its causal mask, which reads the words on both sides."""
    ids = encode(sentence)
    if not isinstance(position, int) or not 1 <= position < ids.shape[1]:
        raise ValueError(f"position must be an int in [1, {ids.shape[1] - 1}]; got {position!r}.")
    target = ids[:, position].clone()
    if bidirectional:
        blank = ids.clone()
        blank[0, position] = UNK
        logits = forward_without_causal_mask(model, blank)[:, position]
    else:
        logits = model(ids[:, :position])[:, -1]
    return float(-torch.log_softmax(logits.double(), dim=-1)[0, target[0]])


@torch.no_grad()
def label_probabilities(model: GPT, prompt: str, labels) -> dict[str, float]:
    """A task written as a prefix: the causal model's next-token probabilities after ``<bos>
    prompt``, renormalised over the label words only (no task head: the LM head scores them)."""
    labels = list(labels)
    if len(labels) < 2 or any(w not in WORDS for w in labels):
        raise ValueError(f"labels must be at least two words of the vocabulary; got {labels!r}.")
    logits = model(encode(prompt))[0, -1].double()
    chosen = torch.softmax(logits[[WORDS.index(w) for w in labels]], dim=-1)
    return {w: float(p) for w, p in zip(labels, chosen)}


def visibility(kind: str, n_source: int = 3, n_target: int = 3) -> torch.Tensor:
    """Bool (L, L): which positions a position reads, for one ``kind`` of model.

    ``"encoder"`` (BERT): all of its ``n_source`` positions. ``"decoder"`` (GPT): the causal
    lower triangle over ``n_target`` positions. ``"encoder-decoder"`` (T5): ``n_source`` source
    rows that read the whole source, then ``n_target`` target rows that read the whole source
    (cross-attention) and the target causally (L = n_source + n_target)."""
    if kind not in VISIBILITY_KINDS:
        raise ValueError(f"kind must be one of {VISIBILITY_KINDS}; got {kind!r}.")
    for name, n in (("n_source", n_source), ("n_target", n_target)):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be an int >= 1; got {n!r}.")
    if kind == "encoder":
        return torch.ones(n_source, n_source, dtype=torch.bool)
    if kind == "decoder":
        return torch.ones(n_target, n_target, dtype=torch.bool).tril()
    L = n_source + n_target
    grid = torch.zeros(L, L, dtype=torch.bool)
    grid[:, :n_source] = True  # everyone reads the source
    grid[n_source:, n_source:] = torch.ones(n_target, n_target, dtype=torch.bool).tril()
    grid[:n_source, n_source:] = False  # the encoder never reads the target
    return grid


def format_visibility(grid: torch.Tensor, names) -> str:
    """A visibility grid as text: one row per reading position, ``x`` where it reads."""
    names = [str(n) for n in names]
    if grid.shape != (len(names), len(names)):
        raise ValueError(
            f"grid must be ({len(names)}, {len(names)}) for {len(names)} names; got {tuple(grid.shape)}."
        )
    w = max(len(n) for n in names) + 1
    lines = [" " * w + "".join(f"{n:>{w}}" for n in names)]
    lines += [
        f"{n:>{w}}" + "".join(f"{'x' if grid[i, j] else '.':>{w}}" for j in range(len(names)))
        for i, n in enumerate(names)
    ]
    return "\n".join(lines)
