"""Every experiment runs (reduced) and reports; the deterministic claims must come out supported.
Timing claims (2, 8, 10) are measurements for the report, not asserted here."""

from aiayn import experiments
from aiayn.cli import main


def test_all_experiments_run_quickly_and_write_the_report(tmp_path, capsys):
    assert main(["experiments", "--quick", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "experiments.md").read_text()
    for number in range(1, 14):
        assert f"\n## {number}. " in report
    assert report.count("**Verdict: ") == 13
    assert "| relative | " in report and f"claims 1-13 on {experiments.machine()}. " in report
    assert "| separate | " in report and "updates to reach" in report
    assert "| en->zh | separate | " in report and "| zh->en | joint | " in report  # claim 13's table
    for figure in ("claim1_softmax_gradients.png", "claim8_attention_cost.png"):
        assert (tmp_path / figure).stat().st_size > 5_000 and f"]({figure})" in report
    printed = capsys.readouterr().out
    for claim in (1, 3, 4, 5, 6, 7):  # exact or seeded statistics: no machine noise
        assert f"claim {claim}: supported" in printed


def test_a_claim_rerun_alone_updates_the_report_and_keeps_the_others(tmp_path, capsys):
    kept = experiments.Finding(3, "an earlier claim", "method", "| a |\n|---|\n| 1 |", True, "kept")
    experiments.save(kept, tmp_path, quick=True)
    experiments.save(experiments.Finding(4, "a full-size finding", "m", "", True, "not quick"),
                     tmp_path, quick=False)
    assert main(["experiments", "--quick", "--only", "5", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "experiments.md").read_text()
    assert "## 3. an earlier claim" in report and "**Verdict: supported.** kept" in report
    assert "\n## 5. " in report and report.count("**Verdict: ") == 2  # not the full-size claim 4
    assert "claim 5: supported" in capsys.readouterr().out
    assert f"claim 3 on a machine not recorded; claim 5 on {experiments.machine()}." in report
    assert (tmp_path / "findings" / "claim5.json").exists()


def test_the_report_says_which_claims_were_measured_where():
    found = [experiments.Finding(n, "c", "m", "", True, "v", machine="A" if n in (1, 2, 3, 5) else "B")
             for n in (1, 2, 3, 5, 9, 11, 12)]
    assert experiments.measured_where(found) == "claims 1-3, 5 on A; claims 9, 11, 12 on B"
    assert experiments.measured_where(found[-1:]) == "claim 12 on B"


def test_a_comparison_run_again_reads_its_trained_models_back(tmp_path):
    """The same comparison into the same place reuses the model trained to the same configs (no
    update again, the same figures, its validation curve once); other configs train anew."""
    from aiayn.experiments import ExperimentContext
    from aiayn.experiments.variants import train_variants

    ctx = ExperimentContext(tmp_path, quick=True)
    run = tmp_path / "runs" / "joint" / "joint"
    first = train_variants(ctx, {"joint": {}}, valid_every=20)
    weights = run / "checkpoints" / "step_00000060" / "model.safetensors"
    written, logged = weights.stat().st_mtime_ns, (run / "metrics.jsonl").read_text()

    again = train_variants(ctx, {"joint": {}}, valid_every=20)
    assert weights.stat().st_mtime_ns == written and (run / "metrics.jsonl").read_text() == logged
    assert (again.bleu, again.long, again.curves) == (first.bleu, first.long, first.curves)
    assert (first.read_back, again.read_back) == ([], ["joint"])
    assert [step for step, _ in again.curves["joint"]] == [20, 40, 60]

    other = train_variants(ctx, {"joint": {"activation": "gelu"}}, valid_every=20)
    assert weights.stat().st_mtime_ns != written
    assert [step for step, _ in other.curves["joint"]] == [20, 40, 60]  # the earlier run's curve is gone
