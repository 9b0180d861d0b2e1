"""Kinds of heads (issue 31, point 2): each measure on heads built to be one kind, and on a real layer."""

import pytest
import torch

from attention.models.kinds import first_heavy, induction, kinds, probe


def built(n: int) -> tuple[torch.Tensor, ...]:
    """Causal heads of n tokens, each wholly one kind: on token 1, on the previous token, on itself, even."""
    sink = torch.zeros(n, n)
    sink[:, 0] = 1.0
    previous = torch.diag(torch.ones(n - 1), -1)
    previous[0, 0] = 1.0  # row 1 sees only itself (left out of every measure)
    even = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    return sink, previous, torch.eye(n), even


N = 5
SINK, PREVIOUS, ITSELF, EVEN = built(N)


@pytest.mark.parametrize(
    ("weights", "name", "share"),
    [(SINK, "first", 1.0), (PREVIOUS, "previous", 1.0), (ITSELF, "itself", 1.0), (EVEN, "broad", 1.0)],
)
def test_a_head_built_to_be_one_kind_is_named_so_with_its_number(weights, name, share):
    assert torch.allclose(weights.sum(-1), torch.ones(N))
    (kind,) = kinds(weights[None], causal=True)
    assert kind.name == name and kind.share == pytest.approx(share)


def test_a_head_of_no_kind_is_mixed_and_its_measures_are_means_over_rows_2_to_n():
    n = 8
    sink, previous, itself, _ = built(n)
    weights = 0.45 * sink + 0.45 * itself + 0.1 * previous  # no half anywhere, and each row on three keys at most
    (kind,) = kinds(weights[None], causal=True)
    first = (0.45 + 0.1 + 0.45 * (n - 2)) / (n - 1)  # row 2's previous token is token 1
    assert kind.name == "mixed" and kind.share == pytest.approx(first) and kind.first == pytest.approx(first)
    assert kind.itself == pytest.approx(0.45) and kind.previous == pytest.approx((0.55 + 0.1 * (n - 2)) / (n - 1))
    assert kinds(torch.ones(1, 1, 1), causal=True) is None  # one token: no row 2 to measure
    assert first_heavy(kinds(torch.stack([SINK, ITSELF, SINK]), causal=True)) == 2


def test_an_encoders_rows_spread_over_every_token():
    """Without a causal mask every row sees all n keys: an even row is broad only against all of them."""
    (kind,) = kinds(torch.full((1, N, N), 1 / N), causal=False)
    assert kind.name == "broad" and kind.share == pytest.approx(1.0)
    (kind,) = kinds(EVEN[None], causal=False)  # even over the earlier keys only: far from even over all n
    assert kind.broad < 0.9


def test_an_induction_head_is_named_by_the_probe_whatever_it_does_on_the_sentence():
    """On the probe (L random tokens, then the same L), an induction head's row L + k looks at token k + 1: the
    one that followed the same token last time. The score is that weight's mean over the second copy."""
    length = 4
    ids = probe(1000, length)
    assert torch.equal(ids[:length], ids[length:]) and ids.min() >= 100 and ids.max() < 500
    on_probe = torch.zeros(2, 2 * length, 2 * length)
    on_probe[0, :, 0] = 1.0  # a sink: none on the next token
    for i in range(length, 2 * length):
        on_probe[1, i, i - length + 1] = 1.0
    scores = induction(on_probe, length)
    assert scores.tolist() == [0.0, 1.0]
    found = kinds(torch.stack([SINK, SINK]), causal=True, induction=scores)
    assert [k.name for k in found] == ["first", "induction"] and found[1].share == 1.0
