"""Why heads park weight on the first token (issue 31, point 3): each number on a head built to park it."""

import pytest
import torch

from attention.models.sink import sinks


def test_a_head_that_parks_its_weight_on_a_small_value_adds_little_to_its_outputs():
    n = 4
    weights = torch.tril(torch.ones(n, n))
    weights[1:, 0] = 3.0  # three times as much on token 1 as on any other it sees
    weights = weights / weights.sum(-1, keepdim=True)
    values = torch.tensor([[0.1, 0.0], [1.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
    outputs = weights @ values
    (first,) = sinks(weights, values, outputs, causal=True)
    assert first.position == 0 and first.share == pytest.approx((3 / 4 + 3 / 5 + 3 / 6) / 3)
    assert first.value_norm == pytest.approx(0.1) and first.others_norm == pytest.approx((1 + 2 + 8**0.5) / 3)
    assert first.output_norm == pytest.approx(float(outputs[1:].norm(dim=-1).mean()))
    without = outputs[1:] - weights[1:, :1] * values[0]  # what the other tokens bring
    assert first.without_norm == pytest.approx(float(without.norm(dim=-1).mean()))
    assert first.output_norm - first.without_norm < 0.1 < 0.6 < first.share  # much weight, little added


def test_an_encoders_places_are_its_first_and_last_token():
    weights = torch.full((3, 3), 1 / 3)
    found = sinks(weights, torch.eye(3), weights @ torch.eye(3), causal=False)
    assert [s.position for s in found] == [0, 2] and all(s.share == pytest.approx(1 / 3) for s in found)
