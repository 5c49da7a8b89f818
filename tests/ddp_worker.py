"""Run by tests/test_distributed.py under ``python -m torch.distributed.run --nproc_per_node=2``.

``grads OUT``: each rank backpropagates its own rows of one ragged float64 batch (two
micro-batches each, through DDP) and rank 0 saves the gradients to OUT.
``resume OUT``: an uninterrupted run, a run stopped early and its resumption; rank 0 saves
whether the resumed weights and history equal the uninterrupted ones. Then a run whose
weights turn NaN on rank 1 only must stop with status "nan" on both ranks (not hang).
"""

import json
import sys
from pathlib import Path

import torch

from lmcore.data import load_corpus
from lmcore.model import GPT, GPTConfig
from lmcore.train import accumulate_gradients, preset, train
from lmcore.train.distributed import setup, teardown, wrap_model


def ragged_batch():
    """4 rows of 12 tokens, V = 9, with 3, 10, 12 and 6 real tokens (the rest -100)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 9, (4, 12), generator=g)
    labels = x.clone()
    for row, n in enumerate((3, 10, 12, 6)):
        labels[row, n:] = -100
    return x, labels


def grads(out: Path):
    ctx = setup(torch.device("cpu"))
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=9, block_size=12, n_layer=1, n_head=2, n_embd=16)).double()
    x, labels = ragged_batch()
    mine = range(2 * ctx.rank, 2 * ctx.rank + 2)  # rank 0: rows 0, 1; rank 1: 2, 3
    micro = [{"input_ids": x[i : i + 1], "labels": labels[i : i + 1]} for i in mine]
    total, n = accumulate_gradients(wrap_model(model, ctx), micro, ctx=ctx)
    if ctx.is_main:
        torch.save(
            {
                "grads": {k: p.grad for k, p in model.named_parameters()},
                "total": total,
                "n": n,
                "world_size": ctx.world_size,
            },
            out,
        )
    teardown(ctx)


def resume(out: Path):
    ctx = setup(torch.device("cpu"))
    chat = load_corpus("chat-arithmetic", n_documents=300, seed=0)
    cfg = preset(
        "smoke", progress=False, max_steps=6, eval_interval=2, eval_batches=1, dropout=0.1, grad_accum=2
    )
    full = train(cfg, chat, out_dir=out / "full")
    part = train(cfg, chat, out_dir=out / "part", callback=lambda step, m: step == 3)
    again = train(cfg, chat, out_dir=out / "part", resume=out / "part" / "checkpoint.pt")

    def poison_rank1(step, model):  # NaN weights on rank 1 only
        if step == 2 and ctx.rank == 1:
            with torch.no_grad():
                model.blocks[0].mlp.c_fc.weight[0, 0] = float("nan")

    nan = train(cfg, chat, callback=poison_rank1)  # must stop on both ranks, not hang
    if ctx.is_main:
        ck = torch.load(out / "part" / "checkpoint.pt", weights_only=True)
        same = all(
            torch.equal(p, q)
            for p, q in zip(full.model.state_dict().values(), again.model.state_dict().values())
        )
        (out / "result.json").write_text(
            json.dumps(
                {
                    "status": [full.status, part.status, again.status],
                    "same_weights": same,
                    "same_history": [(r["step"], r["val_loss"]) for r in full.history]
                    == [(r["step"], r["val_loss"]) for r in again.history],
                    "steps": [r["step"] for r in again.history],
                    "world_size": ck["world_size"],
                    "rank_rng": len(ck["rank_rng"]),
                    "tokens": again.history[-1]["tokens"],
                    "nan": [nan.status, nan.message[:20]],
                }
            )
        )
    else:
        assert full.history == [] and again.history == []  # only rank 0 evaluates
    teardown(ctx)


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"grads": grads, "resume": resume}[sys.argv[1]](Path(sys.argv[2]))
