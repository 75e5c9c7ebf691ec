"""The one YAML loader for what users hand in refuses alias bombs, deep nesting
and oversized input before anything expands them, and still reads ordinary config files."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import pytest
import yaml

from aiconsole import yamlsafe
from tests.helpers.yaml_bombs import (
    ANCHORED_HPTUNING,
    BILLION_LAUGHS,
    DEEP_BLOCK,
    DEEP_FLOW,
    OVERSIZED,
    laughs,
)

REFUSED = {
    "billion laughs": (BILLION_LAUGHS, "the YAML expands to more than 20,000 values"),
    "deep flow lists": (DEEP_FLOW, "the YAML nests more than 100 levels deep"),
    "deep block lists": (DEEP_BLOCK, "the YAML nests more than 100 levels deep"),
    "oversized": (OVERSIZED, "the YAML is longer than 131,072 bytes"),
    "an alias inside its anchor": ("a: &a [1, *a]\n", "the alias *a is used inside the value it names"),
}


@pytest.mark.parametrize(("text", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_a_document_past_a_bound_is_refused_in_a_few_mb(text, message):
    tracemalloc.start()
    try:
        with pytest.raises(yamlsafe.YamlLimitError) as refused:
            yamlsafe.load(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message in str(refused.value)
    assert peak < 5_000_000, f"{peak:,} bytes at the peak"
    assert isinstance(refused.value, yaml.YAMLError)  # callers that catch YAML errors still do


def test_the_bomb_is_refused_after_composing_a_few_dozen_values():
    """Counted, not timed: the refusal comes at the alias that passes the bound, on line 5, long
    before the 387 million strings the last line stands for."""
    with pytest.raises(yamlsafe.YamlLimitError) as refused:
        yamlsafe.load(BILLION_LAUGHS)
    assert refused.value.problem_mark.line + 1 == 5
    assert "(line 5, column" in str(refused.value)


def test_every_bound_can_be_set_by_the_caller():
    assert len(yamlsafe.load(laughs(3, 10))["c"]) == 10
    with pytest.raises(yamlsafe.YamlLimitError, match="more than 500 values"):
        yamlsafe.load(laughs(3, 10), max_values=500)
    with pytest.raises(yamlsafe.YamlLimitError, match="more than 3 levels"):
        yamlsafe.load("a: [[[1]]]", max_depth=3)
    assert yamlsafe.load("a: [[1]]", max_depth=3) == {"a": [[1]]}
    with pytest.raises(yamlsafe.YamlLimitError, match="longer than 10 bytes"):
        yamlsafe.load("a: ééééé", max_bytes=10)  # bytes, not characters


def test_a_config_with_modest_anchors_and_merge_keys_still_loads():
    spec = yamlsafe.load(ANCHORED_HPTUNING)["trainingInput"]["hyperparameters"]
    assert spec == yaml.safe_load(ANCHORED_HPTUNING)["trainingInput"]["hyperparameters"]
    decay = spec["params"][1]
    assert decay["parameterName"] == "decay" and decay["scaleType"] == "UNIT_LOG_SCALE"
    assert spec["params"][3]["discreteValues"] == [1, 2, 4, 8]


def test_ordinary_yaml_errors_are_still_yaml_errors_with_their_place():
    with pytest.raises(yaml.YAMLError) as broken:
        yamlsafe.load("goal: [unclosed")
    assert not isinstance(broken.value, yamlsafe.YamlLimitError)
    with pytest.raises(yaml.YAMLError, match="found undefined alias"):
        yamlsafe.load("a: *nowhere")


def test_a_file_past_the_size_bound_is_refused_without_reading_it_all(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(2**30)  # a sparse GiB: reading it all would show in the peak
    tracemalloc.start()
    try:
        with pytest.raises(yamlsafe.YamlLimitError, match="longer than 131,072 bytes"):
            yamlsafe.read_file(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    small = tmp_path / "config.yaml"
    small.write_text(ANCHORED_HPTUNING)
    assert yamlsafe.load(yamlsafe.read_file(small)) == yaml.safe_load(ANCHORED_HPTUNING)


def test_the_loader_needs_no_django_settings():
    """The CLI's client commands run without Django configured."""
    code = (
        "import sys; from aiconsole import yamlsafe; assert yamlsafe.load('a: 1') == {'a': 1}; "
        "assert 'django' not in sys.modules, 'django imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"}
    )
    assert result.returncode == 0, result.stderr
