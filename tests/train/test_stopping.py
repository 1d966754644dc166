"""Early stopping as a pure function of the validation history: no training needed."""

import pytest

from aiayn.train.stopping import Patience, best, since_improvement, stop_reason


def history(*values):
    return [(100 * (i + 1), v) for i, v in enumerate(values)]


def test_a_plateau_stops_after_exactly_patience_validations():
    losses = history(3.0, 2.5, 2.6, 2.55, 2.7, 2.4)
    rule = Patience(3, "loss")
    stops = [stop_reason(losses[:n], rule) for n in range(1, len(losses) + 1)]
    assert stops[:4] == [None] * 4  # 2.5 at step 200, then one, two validations without improvement
    assert stops[4] == ("--patience 3: validation loss has not improved for 3 validations; the best, 2.5, "
                        "was at step 200")


def test_bleu_and_chrf_improve_upwards():
    scores = history(20.0, 25.0, 24.0, 26.0, 25.5)
    assert best(scores, Patience(2, "bleu")) == (400, 26.0)
    assert since_improvement(scores, Patience(2, "chrf")) == 1
    assert stop_reason(scores, Patience(2, "bleu")) is None
    stopped = stop_reason(scores + [(600, 25.9)], Patience(2, "bleu"))
    assert stopped.startswith("--patience 2: validation bleu")


def test_an_improvement_within_min_delta_does_not_count_but_is_still_the_best():
    scores = history(20.0, 20.05, 20.08)
    rule = Patience(2, "bleu", min_delta=0.1)
    assert since_improvement(scores, rule) == 2
    assert best(scores, rule) == (300, 20.08)
    assert "by more than 0.1" in stop_reason(scores, rule)


def test_ties_keep_the_first_best_and_patience_zero_never_stops():
    assert best(history(2.0, 2.0, 3.0), Patience(1, "loss")) == (100, 2.0)
    assert stop_reason(history(1.0, 2.0, 3.0, 4.0), Patience(0, "loss")) is None
    assert stop_reason([], Patience(1, "loss")) is None


@pytest.mark.parametrize("options, message", [
    ({"patience": 2}, "patience=2 watches validation bleu, measured every --bleu-every updates (0: never)"),
    ({"patience": 2, "stop_metric": "loss", "valid_every": 0}, "measured every --valid-every updates (0: at"),
    ({"stop_metric": "meteor"}, "stop_metric"),
    ({"patience": -1}, "patience=-1 must be at least 0"),
    ({"min_delta": -0.5}, "min_delta=-0.5 must be at least 0"),
])
def test_patience_without_the_validation_it_watches_is_an_error(options, message):
    from aiayn.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig(**options)
