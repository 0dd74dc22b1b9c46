"""Model coverage, CI subset: a few Hugging Face families (one or two per task kind, tiny
configs built on CPU) run on tpu against CPU -- forward, every parameter's gradient and greedy
generate -- in strict and fused modes, and a few under torch.compile(backend="tpu"); results
must agree with torch_tpu/models/expected_failures.txt. The full run is `make models`."""
import pytest

import torch_tpu.models as models

# torch.compile costs seconds per Dynamo graph here (an LM's generate recompiles per length,
# ~20 s): the CI subset compiles one cheap family; `make models` compiles every family.
FAST_COMPILE = ("vit",)


def _check(report, families, modes):
    assert sorted(report["families"]) == sorted(families)
    for name, res in report["families"].items():
        if res.get("status") != "cpu-error":
            assert sorted(res["modes"]) == sorted(modes), name
            for mode, phases in res["modes"].items():
                assert "forward" in phases and "backward" in phases, (name, mode)
    problems = models.check_expected(report)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("family", models.FAST)
def test_model_family(family):
    modes = ("strict", "fused")
    _check(models.run([family], modes=modes, progress=False), [family], modes)


@pytest.mark.parametrize("family", FAST_COMPILE)
def test_model_family_compile(family):
    _check(models.run([family], modes=("compile",), progress=False), [family], ["compile"])


def test_float64_tiebreak_keeps_real_mismatches():
    # The runner re-judges a mismatch against CPU's float64 answer (rounding noise of a float32
    # reference, e.g. groupvit's zero-in-exact-arithmetic fc2.bias gradient); a wrong model must
    # still fail, and the same model unchanged must pass.
    import copy

    import torch

    from torch_tpu.models import registry, runner

    import torch_tpu

    ref = runner.Reference(registry.FAMILIES["bert"])
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        _tiebreak_cases(runner, ref, copy, torch)


def _tiebreak_cases(runner, ref, copy, torch):
    assert runner._run_one(ref, copy.deepcopy(ref.model).to("tpu"), "strict", "backward")["status"] == "pass"
    wrong = copy.deepcopy(ref.model).to("tpu")
    with torch.no_grad():
        wrong.bert.encoder.layer[0].output.dense.weight.mul_(1.001)
    r = runner._run_one(ref, wrong, "strict", "backward")
    assert r["status"] == "mismatch", r
    assert ref.result64("backward") is not None  # the tie-break really ran
