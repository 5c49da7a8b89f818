"""Independent references shared by the core tests: plain Python loops, no lmcore code."""

import math

from lmcore.shift import IGNORE_INDEX  # the constant only


def naive_nll_sums(logits, labels, ignore_index=IGNORE_INDEX):
    """(summed NLL in nats, number of scored targets): position t against labels[t + 1]."""
    total, count = 0.0, 0
    N, L, V = logits.shape
    for n in range(N):
        for t in range(L - 1):
            y = int(labels[n, t + 1])
            if y == ignore_index:
                continue
            z = logits[n, t].double().tolist()
            m = max(z)
            total += m + math.log(sum(math.exp(v - m) for v in z)) - z[y]
            count += 1
    return total, count
