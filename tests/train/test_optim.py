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


def test_adam_uses_the_papers_betas_and_epsilon():
    opt = make_optimizer(torch.nn.Linear(2, 2), TrainConfig())
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
