"""Train-step throughput (forward, backward, AdamW) of lmcore's GPT against a reference.

The reference is the seed's tiny model grown to the same size: token + position embeddings,
``torch.nn.TransformerEncoder`` of pre-LN ``TransformerEncoderLayer`` (GELU, 4x MLP, causal
mask), a final LayerNorm and a tied output projection. Both train with the same loss
(``lmcore.causal_lm_loss``) and the same AdamW, on the same random batches. The two models are
timed in alternating blocks of steps in one process (interleaved A/B), so load from other
processes hits both alike; the table reports the median tokens/s of each and their ratio.

    python benchmarks/train_throughput.py                 # CPU: 4 layers, 4 heads, 128 wide,
                                                          # context 128, batch 32, V = 65, fp32
    python benchmarks/train_throughput.py --threads 2 --rounds 7
    python benchmarks/train_throughput.py --device cuda   # the `gpu` preset's size, bf16, + MFU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmcore.loss import causal_lm_loss  # noqa: E402
from lmcore.model import GPT, GPTConfig  # noqa: E402

__all__ = ["ReferenceLM", "bf16_peak_tflops", "main"]

# Dense bf16 tensor-core peaks (TFLOP/s) from the vendors' data sheets, matched by device name.
_BF16_PEAKS = {
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
    "A10G": 70.0,
    "A10": 125.0,
    "RTX 4090": 165.0,
    "RTX 3090": 71.0,
    "T4": 65.0,
}


def bf16_peak_tflops(name: str) -> float | None:
    for key, peak in _BF16_PEAKS.items():
        if key in name:
            return peak
    return None


class ReferenceLM(nn.Module):
    """The same-size model built from torch.nn.TransformerEncoderLayer (causal mask)."""

    def __init__(self, V, block_size, n_layer, n_head, D):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(block_size, D)
        layer = nn.TransformerEncoderLayer(
            D,
            n_head,
            dim_feedforward=4 * D,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.blocks = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, x):
        L = x.shape[1]
        h = self.wte(x) + self.wpe(torch.arange(L, device=x.device))
        mask = nn.Transformer.generate_square_subsequent_mask(L, device=x.device)
        return self.lm_head(self.ln_f(self.blocks(h, mask=mask, is_causal=True)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=5, help="steps per model per round")
    p.add_argument("--json", default=None, help="also write the results here")
    a = p.parse_args(argv)
    dev = torch.device(a.device)
    if a.threads:
        torch.set_num_threads(a.threads)
    if dev.type == "cuda":  # the `gpu` preset's size, bf16 autocast, TF32
        V, B, NL, NH, D, N = 65, 256, 6, 6, 384, 64
        torch.set_float32_matmul_precision("high")
        autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)
        sync = torch.cuda.synchronize
    else:
        V, B, NL, NH, D, N = 65, 128, 4, 4, 128, 32
        autocast, sync = contextlib.nullcontext, lambda: None
    torch.manual_seed(0)
    models = {
        "lmcore GPT": GPT(GPTConfig(vocab_size=V, block_size=B, n_layer=NL, n_head=NH, n_embd=D)),
        "nn.TransformerEncoderLayer": ReferenceLM(V, B, NL, NH, D),
    }
    opts = {}
    for name, m in models.items():
        m.to(dev).train()
        opts[name] = torch.optim.AdamW(
            m.parameters(), lr=3e-4, **({"fused": True} if dev.type == "cuda" else {})
        )
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, V, (N, B), generator=g).to(dev) for _ in range(4)]

    def run(name, steps):
        m, opt = models[name], opts[name]
        sync()
        t0 = time.perf_counter()
        for s in range(steps):
            x = batches[s % len(batches)]
            with autocast():
                logits = m(x)
            loss = causal_lm_loss(logits, x)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sync()
        return steps * N * B / (time.perf_counter() - t0)

    for name in models:  # warm-up
        run(name, 2)
    rates = {name: [] for name in models}
    for r in range(a.rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        for name in order:
            rates[name].append(run(name, a.steps))
    med = {name: statistics.median(v) for name, v in rates.items()}
    ours, ref = med["lmcore GPT"], med["nn.TransformerEncoderLayer"]
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    res = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "shape": {"n_layer": NL, "n_head": NH, "n_embd": D, "block_size": B, "batch": N, "vocab": V},
        "dtype": "bf16 autocast" if dev.type == "cuda" else "fp32",
        "params": params,
        "tokens_per_s": med,
        "rounds": rates,
        "ratio": ours / ref,
    }
    print(f"{'model':30s} {'params':>9s} {'tokens/s (median)':>18s}")
    for name in models:
        print(f"{name:30s} {params[name]:9d} {med[name]:18.0f}")
    print(
        f"ratio lmcore / reference: {ours / ref:.2f}x  ({res['dtype']}, {res['threads']} threads, "
        f"{a.rounds} rounds x {a.steps} steps, device {res['device']})"
    )
    if dev.type == "cuda":
        peak = bf16_peak_tflops(res["device"])
        fpt = models["lmcore GPT"].flops_per_token()
        if peak:
            res["mfu"] = ours * fpt / (peak * 1e12)
            print(
                f"MFU (6N + attention = {fpt / 1e6:.1f} MFLOP/token, bf16 peak {peak:.0f} TFLOP/s): "
                f"{100 * res['mfu']:.1f}%"
            )
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
