"""grading.toml typed: the kit's own file reads as before, and a mistake in it is refused with the
key, its line and the nearest valid key, before any student is graded against a default."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from course.contracts import grading_rules
from course.errors import GradingError

ROOT = Path(__file__).resolve().parents[1]


def _load(tmp_path: Path, text: str) -> grading_rules.GradingRules:
    path = tmp_path / grading_rules.FILE
    path.write_text(text)
    return grading_rules.load(path)


def test_the_kits_own_file_reads_every_rule(tmp_path):
    rules = grading_rules.load(ROOT / grading_rules.FILE)
    cpu = rules.efficiency("multi_node", "cpu")
    assert cpu.tiers == [(0.5, 1), (0.3, 0.5)] and cpu.suspicious_above == 1.25
    gpu = rules.efficiency("multi_node", "gpu")  # no [efficiency.multi_node.gpu]: the stage's
    assert gpu.tiers == [(0.7, 1), (0.5, 0.5), (0.25, 0.25)] and gpu.suspicious_above == 1.05
    assert rules.accuracy_target("synthetic_32px_10p") == 0.85  # a variant takes its base's
    assert rules.accuracy_target("unknown") is None
    assert (rules.throughput_noise("cpu"), rules.throughput_noise("gpu")) == (0.4, 0.1)
    assert rules.prediction_factor == 4.0 and rules.shared_below == 0.8
    assert rules.accounting_enabled and rules.cluster_user("ada") is None
    # a tier as written: 1 stays 1, and 1.0 stays 1.0, in the messages that quote it
    assert str(rules.efficiency("multi_gpu", "gpu").tiers[0]) == "(0.75, 1.0)"
    written = _load(tmp_path, "[efficiency.multi_gpu]\ntiers = [[0.75, 1]]\n")
    assert str(written.efficiency("multi_gpu", "gpu").tiers[0]) == "(0.75, 1)"


def test_an_empty_file_takes_every_default(tmp_path):
    rules = _load(tmp_path, "")
    assert rules.efficiency("multi_gpu", "gpu") == grading_rules.EfficiencyLimits(
        [], grading_rules.SUSPICIOUS_ABOVE
    )
    assert rules.prediction_factor == grading_rules.PREDICTION_FACTOR
    assert rules.accuracy_noise == grading_rules.ACCURACY_NOISE


@pytest.mark.parametrize(
    "text, said, hint",
    [
        (
            "[efficiency.multi_nod]\ntiers = [[0.5, 1]]\n",
            "grading.toml:1: unknown key `efficiency.multi_nod`",
            "did you mean `multi_node`?",
        ),
        (
            "# a comment\n[allreduce]\nprediction_factr = 3\n",
            "grading.toml:3: unknown key `allreduce.prediction_factr`",
            "did you mean `prediction_factor`? [allreduce] takes prediction_factor, shared_below",
        ),
        ("[allreduce]\nshared_below = '0.8'\n", "`allreduce.shared_below` should be a number", ""),
        ("[accounting]\nenabled = 'no'\n", "`accounting.enabled` should be true or false", ""),
        ("[efficiency.multi_gpu]\ntiers = [[0.5]]\n", "`efficiency.multi_gpu.tiers[0][1]`", ""),
        ("[allreduce]\nprediction_factor = nan\n", "`allreduce.prediction_factor`", ""),
    ],
)
def test_a_mistake_is_refused_with_its_key_and_line(tmp_path, text, said, hint):
    with pytest.raises(GradingError) as refused:
        _load(tmp_path, text)
    assert said in refused.value.message
    assert hint in refused.value.hint


def test_the_bundle_is_not_made_from_a_misspelt_file(tmp_path):
    source = tmp_path / grading_rules.FILE
    source.write_text("[prediction]\naccuracy_nosie = 0.1\n")
    with pytest.raises(GradingError, match="accuracy_nosie"):
        grading_rules.write_public(source, tmp_path / "public.json")
    assert not (tmp_path / "public.json").exists()


def test_the_public_part_reads_as_the_instructors_file(tmp_path):
    written = grading_rules.write_public(ROOT / grading_rules.FILE, tmp_path / "public.json")
    public = grading_rules.GradingRules(json.loads(written.read_text()), str(written))
    full = grading_rules.GradingRules(tomllib.loads((ROOT / grading_rules.FILE).read_text()))
    for stage, kind in [("multi_gpu", "gpu"), ("multi_node", "cpu")]:
        assert public.efficiency(stage, kind) == full.efficiency(stage, kind)
    assert public.references == full.references
