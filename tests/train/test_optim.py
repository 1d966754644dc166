import pytest
import torch

from aiayn.config import TrainConfig
from aiayn.train.optim import learning_rate, make_optimizer


@pytest.mark.parametrize("step, expected", [
    (1, 1.7469281e-07),       # 512^-0.5 * 1 * 4000^-1.5
    (100, 1.7469281e-05),     # still warming up: linear in the step
    (4000, 6.9877124e-04),    # the peak: 512^-0.5 * 4000^-0.5
    (16000, 3.4938562e-04),   # 512^-0.5 * 16000^-0.5: half the peak at four times the step
])
def test_learning_rate_matches_the_papers_formula(step, expected):
    assert learning_rate(step, d_model=512, warmup_steps=4000) == pytest.approx(expected, rel=1e-6)


def test_scale_multiplies_the_whole_schedule():
    assert learning_rate(300, 256, 400, scale=2.0) == pytest.approx(2 * learning_rate(300, 256, 400))


def test_linear_decay_keeps_the_papers_rise_and_falls_to_zero_at_the_last_update():
    paper = lambda step: learning_rate(step, 128, 1000, scale=1.5)  # noqa: E731
    linear = lambda step: learning_rate(step, 128, 1000, 1.5, "linear", last_step=3000)  # noqa: E731
    assert [linear(s) for s in (1, 500, 1000)] == [paper(s) for s in (1, 500, 1000)]
    peak = 1.5 * 128**-0.5 * 1000**-0.5
    assert linear(2000) == pytest.approx(peak / 2) and linear(2500) == pytest.approx(peak / 4)
    assert linear(3000) == 0.0 and linear(3500) == 0.0  # resumed past its end: no negative rate


def test_linear_decay_needs_a_last_update_after_the_warm_up():
    from aiayn.config import ConfigError

    with pytest.raises(ConfigError, match="max_steps"):
        TrainConfig(lr_decay="linear", warmup_steps=1000, max_steps=0)


def test_adam_uses_the_papers_betas_and_epsilon():
    opt = make_optimizer(torch.nn.Linear(2, 2), TrainConfig())
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
