"""Peak memory and time of the LM-head loss: naive full logits, ``chunked_causal_lm_loss``, and
PyTorch's native ``F.linear_cross_entropy`` (torch >= 2.13; its column reads n/a below).

Forward + backward of the output projection and the next-token cross-entropy, from hidden
states (N, L, D) and weight (V, D), with about 10% of the targets ignored (-100):

* ``naive``:   ``logits = hidden @ weight.T`` (N, L, V), then ``F.cross_entropy`` on all of them
  (labels shifted by padding them with -100, as Hugging Face does, so the logits are not copied).
* ``chunked``: ``lmcore.chunked_causal_lm_loss(hidden, weight, labels)``.
* ``native``:  ``F.linear_cross_entropy(hidden, weight, labels, options=LinearCrossEntropyOptions())``
  (PyTorch's chunked path with its default, automatic chunking; labels shifted as for naive).

Each measurement runs in a fresh subprocess: the inputs are built, the peak-RSS counter is reset
(``/proc/self/clear_refs``; ``ru_maxrss`` where that is unavailable) and the baseline taken, one
forward + backward runs, and the growth of the peak over the baseline is the memory figure.
Further repetitions in the same process give the time. Variants alternate over several rounds,
so load from other processes hits both alike; the table reports medians.

    python benchmarks/loss_memory.py                 # V in {65, 50257}, 3 rounds (~8 min, 2 cores)
    python benchmarks/loss_memory.py --vocab 65 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

__all__ = ["run_variant", "main"]

NL, D, N = 8192, 768, 8  # N * L = 8192 tokens, width D
IGNORED = 0.10
VARIANTS = ("naive", "chunked", "native")


def has_native() -> bool:
    import torch
    import torch.nn.functional as F

    return hasattr(F, "linear_cross_entropy") and hasattr(torch.nn, "LinearCrossEntropyOptions")


def _rss_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_kib(resettable: bool) -> int:
    if resettable:
        return _rss_kib("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def run_variant(variant: str, V: int, repeats: int) -> dict:
    """Build inputs, measure one forward+backward's peak-RSS growth, then time ``repeats`` runs."""
    import torch
    import torch.nn.functional as F

    from lmcore import chunked_causal_lm_loss

    torch.manual_seed(0)
    L = NL // N
    hidden = torch.randn(N, L, D, requires_grad=True)
    weight = (torch.randn(V, D) * 0.02).requires_grad_()
    labels = torch.randint(0, V, (N, L))
    labels[torch.rand(N, L) < IGNORED] = -100

    shifted = F.pad(labels[:, 1:], (0, 1), value=-100).reshape(-1)  # (N * L,), as lmcore shifts

    def step():
        if variant == "naive":
            logits = hidden @ weight.T  # (N, L, V)
            loss = F.cross_entropy(logits.view(-1, V), shifted, ignore_index=-100)
        elif variant == "native":
            opts = torch.nn.LinearCrossEntropyOptions()
            loss = F.linear_cross_entropy(
                hidden.view(-1, D), weight, shifted, ignore_index=-100, options=opts
            )
        else:
            loss = chunked_causal_lm_loss(hidden, weight, labels)
        loss.backward()
        hidden.grad = weight.grad = None
        return float(loss.detach())

    # Warm up the kernels on a slice small enough not to matter for memory.
    with torch.no_grad():
        (hidden[:1, :8] @ weight.T).logsumexp(-1)
    resettable = _reset_peak()
    base = _rss_kib("VmRSS") if resettable else _peak_kib(False)
    t0 = time.perf_counter()
    loss = step()
    times = [time.perf_counter() - t0]
    growth_kib = _peak_kib(resettable) - base
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {
        "variant": variant,
        "V": V,
        "loss": loss,
        "growth_mib": growth_kib / 1024,
        "time_s": statistics.median(times),
        "peak_reset": resettable,
        "threads": torch.get_num_threads(),
    }


def _spawn(variant: str, V: int, repeats: int) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        variant,
        "--vocab",
        str(V),
        "--repeats",
        str(repeats),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, nargs="+", default=[65, 50257])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--repeats", type=int, default=None, help="timed runs per process (default: 30 for V < 4096, else 2)"
    )
    ap.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(run_variant(args.worker, args.vocab[0], args.repeats or 1)))
        return

    variants = VARIANTS if has_native() else VARIANTS[:2]
    rows = []
    for V in args.vocab:
        repeats = args.repeats or (30 if V < 4096 else 2)
        res = {v: [] for v in variants}
        for r in range(args.rounds):
            order = variants if r % 2 == 0 else variants[::-1]  # interleave, alternate order
            for v in order:
                res[v].append(_spawn(v, V, repeats))
                print(
                    f"# V={V} round {r + 1} {v}: {res[v][-1]['growth_mib']:.0f} MiB, "
                    f"{res[v][-1]['time_s']:.3f} s",
                    file=sys.stderr,
                    flush=True,
                )
        med = {
            v: {k: statistics.median(x[k] for x in res[v]) for k in ("growth_mib", "time_s")}
            for v in variants
        }
        losses = [x["loss"] for v in variants for x in res[v]]
        rows.append((V, med, max(losses) - min(losses)))

    import torch

    print(
        f"\nLM-head loss, forward + backward: N*L = {NL}, D = {D}, {IGNORED:.0%} targets ignored, "
        f"fp32, torch {torch.__version__}, {res['naive'][0]['threads']} threads; medians of "
        f"{args.rounds} interleaved rounds, each variant in a fresh process. Ratios are to naive.\n"
    )
    print(
        "| V | peak growth: naive / chunked / native | memory ratio: chunked, native | "
        "time: naive / chunked / native | time ratio: chunked, native | max loss diff |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for V, med, diff in rows:
        n = med["naive"]
        get = lambda v, k, fmt, med=med: fmt.format(med[v][k]) if v in med else "n/a"
        ratio = lambda v, k, med=med, n=n: f"{med[v][k] / max(n[k], 1e-9):.3f}" if v in med else "n/a"
        print(
            f"| {V:,} | {' / '.join(get(v, 'growth_mib', '{:,.0f} MiB') for v in VARIANTS)} | "
            f"{ratio('chunked', 'growth_mib')}, {ratio('native', 'growth_mib')} | "
            f"{' / '.join(get(v, 'time_s', '{:.3f} s') for v in VARIANTS)} | "
            f"{ratio('chunked', 'time_s')}, {ratio('native', 'time_s')} | {diff:.1e} |"
        )


if __name__ == "__main__":
    main()
