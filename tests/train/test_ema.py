"""The moving average of the weights: its update in closed form, its ramp, swapping it in and out."""

import pytest
import torch
from torch import nn

from aiayn.train.ema import EMA


def model_with(value: float) -> nn.Module:
    layer = nn.Linear(2, 2)
    with torch.no_grad():
        for p in layer.parameters():
            p.fill_(value)
    return layer


def test_the_average_follows_the_update_rule_with_its_ramp():
    layer = model_with(0.0)
    ema = EMA(layer, decay=0.999)
    expected = 0.0
    for t, value in enumerate([1.0, 2.0, 3.0]):
        with torch.no_grad():
            for p in layer.parameters():
                p.fill_(value)
        d = min(0.999, (1 + t) / (10 + t))  # 0.1, 2/11, 3/12: the start weighs little
        ema.update(layer)
        expected = d * expected + (1 - d) * value
        assert all(torch.allclose(a, torch.full_like(a, expected)) for a in ema.average)
    assert ema.updates == 3


def test_the_decay_reaches_d_and_stays_there():
    ema = EMA(model_with(0.0), decay=0.9)
    rates = []
    for _ in range(200):
        rates.append(ema.rate())
        ema.updates += 1
    assert rates[0] == pytest.approx(0.1) and rates == sorted(rates) and rates[-1] == 0.9


def test_applied_swaps_the_average_in_and_the_weights_back():
    layer = model_with(5.0)
    ema = EMA(layer, decay=0.5)
    ema.average = [torch.full_like(a, 1.0) for a in ema.average]
    x = torch.ones(1, 2)
    with ema.applied(layer):
        assert torch.equal(layer(x), torch.full((1, 2), 3.0))  # 1 + 1 + bias 1
    assert all(torch.equal(p, torch.full_like(p, 5.0)) for p in layer.parameters())
    copy = ema.model(layer)
    assert all(torch.equal(p, torch.full_like(p, 1.0)) for p in copy.parameters())
    assert all(torch.equal(p, torch.full_like(p, 5.0)) for p in layer.parameters())


def test_applied_puts_the_weights_back_after_an_error():
    layer = model_with(5.0)
    ema = EMA(layer, decay=0.5)
    ema.average = [torch.zeros_like(a) for a in ema.average]
    with pytest.raises(RuntimeError), ema.applied(layer):
        raise RuntimeError("validation failed")
    assert all(torch.equal(p, torch.full_like(p, 5.0)) for p in layer.parameters())


def test_state_and_load_continue_the_average_exactly():
    layer = model_with(0.0)
    ema = EMA(layer, decay=0.99)
    for value in (1.0, 2.0):
        with torch.no_grad():
            layer.weight.fill_(value)
        ema.update(layer)
    resumed = EMA(model_with(7.0), decay=0.99)
    resumed.load({**ema.state(), "weights": [p for p in ema.model(layer).parameters()]})
    for e in (ema, resumed):
        e.update(layer)
    assert resumed.updates == ema.updates == 3
    assert all(torch.equal(a, b) for a, b in zip(ema.average, resumed.average, strict=True))
