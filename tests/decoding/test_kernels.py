"""The kernels of compiled steps chosen by timing them on the machine (decoding/kernels.py)."""

import itertools

import pytest
import torch

from aiayn.cli import main
from aiayn.decoding import kernels, whole
from tests.conftest import random_ids, tiny_model

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch")


class FakeClock:
    """A clock under which each round of `time_layouts` sees the candidates take the given seconds
    (it reads the clock before and after each candidate's calls, plain first)."""

    def __init__(self, plain: float, packed: float) -> None:
        self.now, self.reads = 0.0, 0
        self.steps = itertools.cycle([0.0, plain * kernels.CALLS, 0.0, packed * kernels.CALLS])

    def __call__(self) -> float:
        self.reads += 1
        self.now += next(self.steps)
        return self.now


@pytest.fixture
def measured(tmp_path, monkeypatch):
    """Kernels chosen by timing (not the tests' rows rule), into a cache of the test's own."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AIAYN_KERNELS")
    monkeypatch.setattr(kernels, "_known", {})


@pytest.mark.parametrize("plain, packed, chosen", [(1e-3, 2e-3, False), (2e-3, 1e-3, True)])
def test_the_faster_candidate_is_chosen_and_kept_for_later_processes(measured, monkeypatch, plain, packed,
                                                                      chosen):
    model = tiny_model()
    clock = FakeClock(plain, packed)
    monkeypatch.setattr(kernels, "clock", clock)
    assert kernels.packed(model, 4) is chosen
    assert clock.reads == 4 * kernels.ROUNDS  # timed once
    assert kernels.packed(model, 4) is chosen and clock.reads == 4 * kernels.ROUNDS  # this process: known
    monkeypatch.setattr(kernels, "_known", {})  # a later process reads the stored choice, times nothing
    assert kernels.packed(model, 4) is chosen and clock.reads == 4 * kernels.ROUNDS
    (record,) = kernels.choices()
    assert record["packed"] is chosen and record["rows"] == 4
    assert record["microseconds"] == {"plain": pytest.approx(plain * 1e6),
                                      "packed": pytest.approx(packed * 1e6)}
    kernels.packed(model, 2)  # another row count: timed on its own
    assert clock.reads == 8 * kernels.ROUNDS and len(kernels.choices()) == 2


def test_a_lone_sentence_searches_on_packed_steps_where_packed_is_faster(measured, monkeypatch):
    """The whole search as one graph runs plain products: where packed ones win at its rows, the
    search goes to the compiled steps, which pack."""
    model, src, limits = tiny_model(), random_ids(1, 6), torch.tensor([9])
    monkeypatch.setattr(kernels, "clock", FakeClock(2e-3, 1e-3))
    assert not whole.takes(model, src, 4, limits)
    monkeypatch.setattr(kernels, "_known", {})
    kernels.forget()
    monkeypatch.setattr(kernels, "clock", FakeClock(1e-3, 2e-3))
    assert whole.takes(model, src, 4, limits)


def test_the_timing_runs_both_candidates_on_the_models_maps(measured):
    model = tiny_model()
    shapes = kernels.linear_shapes(model)
    d, v = model.config.d_model, model.config.vocab_size
    assert (d, v, 1) in shapes and (d, model.config.d_ff, model.config.n_decoder_layers) in shapes
    times = kernels.time_layouts(shapes, 4)
    assert set(times) == {"plain", "packed"} and all(t > 0 for t in times.values())


def test_aiayn_kernels_overrides_the_timing(monkeypatch):
    model = tiny_model()
    for value, rows, expected in (("plain", 32, False), ("packed", 2, True), ("rows", 4, False),
                                  ("rows", 0, True)):
        monkeypatch.setenv("AIAYN_KERNELS", value)
        assert kernels.packed(model, rows) is expected
    monkeypatch.setenv("AIAYN_KERNELS", "fast")
    with pytest.raises(ValueError, match="AIAYN_KERNELS='fast': use plain, packed or rows"):
        kernels.packed(model, 4)


def test_cache_info_lists_the_choices_and_clear_forgets_them(measured, monkeypatch, capsys):
    monkeypatch.setattr(kernels, "clock", FakeClock(2e-3, 1e-3))
    kernels.packed(tiny_model(), 4)
    assert main(["cache", "info"]) == 0
    assert "kernels for 4 rows" in capsys.readouterr().out and "packed (plain 2000.0 us, packed 1000.0 us" \
        in kernels.describe(kernels.choices()[0])
    assert main(["cache", "clear"]) == 0
    assert kernels.choices() == []


@pytest.mark.parametrize("mkl, onednn, chosen", [(1e-3, 2e-3, "mkl"), (2e-3, 1e-3, "onednn")])
def test_the_eager_path_packs_for_the_library_timed_faster(measured, monkeypatch, mkl, onednn, chosen):
    """`inference.pack_for_cpu` (the eager float32 path) packs its maps for MKL or oneDNN, whichever the
    timing at a lone sentence's rows and a batch's found faster; both compute the model's logits."""
    from aiayn import inference

    if not inference.packing_available(torch.float32):
        pytest.skip("no packed float32 matmul here")
    model = tiny_model()
    clock = FakeClock(mkl, onednn)  # the candidates in turn: MKL's first
    monkeypatch.setattr(kernels, "clock", clock)
    assert kernels.eager_packing(model) == chosen
    assert clock.reads == 4 * kernels.ROUNDS * len(kernels.EAGER_ROWS)
    packed = inference.pack_for_cpu(model)
    kinds = {type(m).__name__ for m in packed.modules() if isinstance(m, inference._PackedWeight)}
    assert kinds == {"OneDNNPackedLinear" if chosen == "onednn" else "MKLPackedLinear"}
    src, tgt = random_ids(3, 7), random_ids(3, 5, seed=1)
    with torch.inference_mode():
        assert torch.allclose(packed(src, tgt), model(src, tgt), atol=1e-4)
    (record,) = kernels.choices()
    assert record["path"] == "eager" and "the eager path" in kernels.describe(record)


def test_the_machine_is_named_by_vendor_model_and_the_units_that_decide_its_speed(tmp_path):
    """What the kernel choices and every benchmark's machine line say of the CPU (`timing.cpu_name`):
    a virtual machine's model name may lack the vendor and hides AMX or AVX-512."""
    from aiayn.timing import cpu_name

    info = tmp_path / "cpuinfo"
    info.write_text("vendor_id\t: AuthenticAMD\nmodel name\t: EPYC 9R14\n"
                    "flags\t\t: fpu sse avx avx2 avx512f avx512_bf16 avx512_vnni\n\nflags\t\t: fpu\n")
    capability = torch.backends.cpu.get_cpu_capability()
    assert cpu_name(info) == f"AMD EPYC 9R14 (AVX2, AVX-512, AVX512-BF16, VNNI, PyTorch {capability})"
    info.write_text("vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n"
                    "flags\t\t: avx2 avx512f amx_tile amx_bf16\n")
    assert cpu_name(info) == f"Intel(R) Xeon(R) Processor (AVX2, AVX-512, AMX, PyTorch {capability})"
