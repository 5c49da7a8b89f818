"""Independent references shared by the core tests: plain Python loops, no lmcore code."""

import math

import torch

from lmcore.shift import IGNORE_INDEX  # the constant only


def naive_nll_sums(logits, labels, ignore_index=IGNORE_INDEX, smoothing=0.0):
    """(summed NLL in nats, number of scored targets): position t against labels[t + 1]. With
    ``smoothing`` eps, each valid target's -sum_v q_v ln p_v, q = (1 - eps) onehot(y) + eps / V."""
    total, count = 0.0, 0
    N, L, V = logits.shape
    for n in range(N):
        for t in range(L - 1):
            y = int(labels[n, t + 1])
            if y == ignore_index:
                continue
            z = logits[n, t].double().tolist()
            m = max(z)
            log_z = m + math.log(sum(math.exp(v - m) for v in z))
            total += sum(((1 - smoothing) * (v == y) + smoothing / V) * (log_z - z[v]) for v in range(V))
            count += 1
    return total, count


def make(seed, N, L, D, V, dtype=torch.float32, p_ignore=0.25):
    """Seeded LM-head inputs: hidden (N, L, D), weight (V, D), labels (N, L) with about
    ``p_ignore`` of them -100 and at least one valid target."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(N, L, D, generator=g, dtype=torch.float64).to(dtype)
    weight = (torch.randn(V, D, generator=g, dtype=torch.float64) * D**-0.5).to(dtype)
    labels = torch.randint(0, V, (N, L), generator=g)
    labels[torch.rand(N, L, generator=g) < p_ignore] = IGNORE_INDEX
    labels[0, -1] = 0  # at least one valid target
    return hidden, weight, labels
