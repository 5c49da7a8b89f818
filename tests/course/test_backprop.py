"""Notebook 02's head-gradient exercise: the formula against autograd and finite differences,
and a checker that rejects plausible wrong answers."""

import pytest
import torch
import torch.nn.functional as F

from lmcore.course import backprop as B


def _loss(H, W, y):
    return F.cross_entropy((H @ W.T).reshape(-1, W.shape[0]), y.reshape(-1))


def test_head_grads_match_autograd_and_finite_differences():
    g = torch.Generator().manual_seed(0)
    H = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    W = torch.randn(5, 4, generator=g, dtype=torch.float64)
    y = torch.randint(5, (2, 3), generator=g)
    dW, dH = B.head_grads(H, W, y)
    aW, aH = B.head_grads_autograd(H, W, y)
    assert dW.shape == W.shape and dH.shape == H.shape
    assert torch.allclose(dW, aW, atol=1e-12) and torch.allclose(dH, aH, atol=1e-12)
    eps = 1e-6
    for i, j in ((0, 0), (3, 2), (4, 1)):
        up, down = W.clone(), W.clone()
        up[i, j] += eps
        down[i, j] -= eps
        fd = (_loss(H, up, y) - _loss(H, down, y)) / (2 * eps)
        assert abs(float(fd) - float(dW[i, j])) < 1e-8


def test_head_grads_validate():
    H, W, y = torch.zeros(1, 2, 3), torch.zeros(4, 3), torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="must agree"):
        B.head_grads(H, torch.zeros(4, 5), y)
    with pytest.raises(TypeError, match="y"):
        B.head_grads(H, W, y.float())
    with pytest.raises(ValueError, match="H"):
        B.head_grads(H[0], W, y)


def _mine(H, W, y):
    N, T, D = H.shape
    h = H.reshape(-1, D)
    dZ = (torch.softmax(h @ W.T, -1) - F.one_hot(y.reshape(-1), W.shape[0])) / (N * T)
    return dZ.T @ h, (dZ @ W).reshape(H.shape)


def test_checker_accepts_the_formula_and_rejects_wrong_ones(capsys):
    assert B.check_head_grads(_mine)

    def scaled(k):
        def f(H, W, y):
            dW, dH = _mine(H, W, y)
            return dW * k(H), dH * k(H)

        return f

    def transposed(H, W, y):
        dW, dH = _mine(H, W, y)
        return dW.T, dH

    def uses_autograd(H, W, y):
        h = H.clone().requires_grad_(True)
        w = W.clone().requires_grad_(True)
        _loss(h, w, y).backward()
        return w.grad, h.grad

    def dh_with_w_transposed(H, W, y):  # (P - Y) W^T: wrong unless V == D
        N, T, D = H.shape
        h = H.reshape(-1, D)
        dZ = (torch.softmax(h @ W.T, -1) - F.one_hot(y.reshape(-1), W.shape[0])) / (N * T)
        return dZ.T @ h, dZ @ W.T

    wrongs = [
        scaled(lambda H: H.shape[0] * H.shape[1]),  # forgot the 1/n
        scaled(lambda H: H.shape[1]),  # divided by N only, not N*T
        scaled(lambda H: -1.0),  # Y - P
        transposed,  # H^T (P - Y): W's transpose
        dh_with_w_transposed,
        uses_autograd,
    ]  # not by hand: autograd is off
    assert not any(B.check_head_grads(w) for w in wrongs)
    out = capsys.readouterr().out
    assert out.count("fail") == len(wrongs) and out.count("pass") == 1


def test_checker_says_not_attempted_for_a_stub(capsys):
    def stub(H, W, y):
        raise NotImplementedError

    assert not B.check_head_grads(stub)
    assert "not attempted yet" in capsys.readouterr().out
