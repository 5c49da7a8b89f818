"""Notebook 02's head and tied-embedding gradients: the formulas against autograd and finite
differences, and a checker that rejects plausible wrong answers, autograd and the course's answer."""

import pytest
import torch
import torch.nn.functional as F

from lmcore.course.gradients import backprop as B


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


def _tied_loss(E, x, y):
    return F.cross_entropy((E[x] @ E.T).reshape(-1, E.shape[0]), y.reshape(-1))


def test_tied_grads_match_autograd_and_finite_differences():
    g = torch.Generator().manual_seed(1)
    E = torch.randn(4, 3, generator=g, dtype=torch.float64)
    x = torch.tensor([[0, 1, 1, 3], [2, 1, 0, 0]])  # ids repeat
    y = torch.tensor([[1, 1, 3, 0], [0, 2, 2, 1]])
    dE = B.tied_grads(E, x, y)
    assert dE.shape == E.shape and torch.allclose(dE, B.tied_grads_autograd(E, x, y), atol=1e-12)
    eps = 1e-6
    for i in range(4):
        for j in range(3):
            up, down = E.clone(), E.clone()
            up[i, j] += eps
            down[i, j] -= eps
            fd = (_tied_loss(up, x, y) - _tied_loss(down, x, y)) / (2 * eps)
            assert abs(float(fd) - float(dE[i, j])) < 1e-8


def test_tied_grads_validate():
    E, x = torch.zeros(4, 3, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="token ids"):
        B.tied_grads(E, x + 4, x)
    with pytest.raises(TypeError, match="x"):
        B.tied_grads(E, x.float(), x)
    with pytest.raises(ValueError, match="both be"):
        B.tied_grads(E, x, torch.zeros(2, 1, dtype=torch.long))


def _by_hand(E, x, y):  # an independent correct answer: the two terms as explicit loops
    V = E.shape[0]
    ids, targets = x.reshape(-1).tolist(), y.reshape(-1).tolist()
    n = len(ids)
    dE = torch.zeros_like(E)
    for i, t in zip(ids, targets):
        dz = (torch.softmax(E @ E[i], 0) - F.one_hot(torch.tensor(t), V).to(E.dtype)) / n
        dE += dz[:, None] * E[i][None, :]  # the head: row v gets dz_v * h
        dE[i] += dz @ E  # the lookup: dh = dz E goes into row i
    return dE


def _terms(E, x, y):
    ids = x.reshape(-1)
    h = E[ids]
    dZ = (torch.softmax(h @ E.T, -1) - F.one_hot(y.reshape(-1), E.shape[0]).to(E.dtype)) / ids.numel()
    return ids, h, dZ


def _head_only(E, x, y):
    ids, h, dZ = _terms(E, x, y)
    return dZ.T @ h


def _lookup_only(E, x, y):
    ids, h, dZ = _terms(E, x, y)
    return torch.zeros_like(E).index_add(0, ids, dZ @ E)


def _fancy_index_add(E, x, y):  # dE[ids] += dH keeps one row per repeated id
    ids, h, dZ = _terms(E, x, y)
    dE = dZ.T @ h
    dE[ids] += dZ @ E
    return dE


def _no_mean(E, x, y):
    return _by_hand(E, x, y) * x.numel()


def _mean_twice(E, x, y):
    return _by_hand(E, x, y) / x.numel()


def _autograd_under_enable_grad(E, x, y):
    with torch.enable_grad():
        e = E.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(_tied_loss(e, x, y), e)
    return g


def _backward(E, x, y):
    with torch.enable_grad():
        e = E.detach().clone().requires_grad_(True)
        _tied_loss(e, x, y).backward()
    return e.grad


def test_tied_checker_accepts_independent_answers(capsys):
    assert B.check_tied_grads(_by_hand)
    out, err = capsys.readouterr()
    assert out.startswith("✓ pass") and err == ""


def _float32(E, x, y):  # the notebook's solution, computed in float32
    E32, ids = E.float(), x.reshape(-1)
    h = E32[ids]
    dZ = (torch.softmax(h @ E32.T, -1) - F.one_hot(y.reshape(-1), E.shape[0]).float()) / ids.numel()
    return (dZ.T @ h).index_add(0, ids, dZ @ E32)


def test_tied_checker_accepts_a_float32_answer(capsys):
    """Issue 38: rejected under atol 1e-9, rtol 1e-7 (expected -0.1417558, got -0.1417557)."""
    assert B.check_tied_grads(_float32)
    assert capsys.readouterr().out.startswith("✓ pass")


@pytest.mark.parametrize("wrong", [_head_only, _lookup_only, _fancy_index_add, _no_mean, _mean_twice])
def test_tied_checker_rejects_plausible_mistakes(wrong, capsys):
    assert not B.check_tied_grads(wrong)
    out = capsys.readouterr().out
    assert out.startswith("✗ fail") and len(out.splitlines()) == 1 and "tensor([" not in out


def test_tied_checker_names_the_ratio(capsys):
    assert not B.check_tied_grads(_no_mean)
    assert "the loss is a mean; is your gradient one too?" in capsys.readouterr().out
    assert not B.check_tied_grads(_mean_twice)
    assert "how many times did you divide" in capsys.readouterr().out


@pytest.mark.parametrize(
    "cheat",
    [
        _autograd_under_enable_grad,
        _backward,
        B.tied_grads,
        B.tied_grads_autograd,
        lambda E, x, y: B.tied_grads(E, x, y),
    ],
)
def test_tied_checker_rejects_autograd_and_the_course_answer(cheat, capsys):
    assert not B.check_tied_grads(cheat)
    assert "your function called" in capsys.readouterr().out


def test_checker_says_not_attempted_for_a_stub(capsys):
    def stub(E, x, y):
        raise NotImplementedError

    assert not B.check_tied_grads(stub)
    assert "not attempted yet" in capsys.readouterr().out
