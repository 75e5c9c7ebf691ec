"""YAML documents that must be refused before anything expands them, and a config that must not."""

from __future__ import annotations


def laughs(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each level a list of ``width`` aliases of the level below, so the
    last one stands for ``width ** levels`` strings (9 × 9: 387 million, in about 340 bytes)."""
    names = [chr(ord("a") + level) for level in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    lines += [
        f"{name}: &{name} [{', '.join([f'*{names[level - 1]}'] * width)}]" for level, name in enumerate(names) if level
    ]
    return "\n".join(lines) + "\n"


BILLION_LAUGHS = laughs()
# 10 ** 5 values written out: past the bound, yet small enough that code without the bound
# expands it in a moment (so a test of a whole page fails cleanly rather than exhausting memory).
HUNDRED_THOUSAND_LAUGHS = laughs(5, 10)
DEEP_FLOW = "goal: " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_BLOCK = "goal:\n" + "".join(" " * level + "- \n" for level in range(1, 400))
OVERSIZED = "goal: MAXIMIZE\nparams:\n" + "  - {parameterName: p, type: DOUBLE, minValue: 0, maxValue: 1}\n" * 4000

# An hptuning_config.yaml as people write them: an anchor and a merge key for shared fields.
ANCHORED_HPTUNING = """\
trainingInput:
  scaleTier: BASIC
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: accuracy
    maxTrials: 4
    params:
      - &rate
        parameterName: learning_rate
        type: DOUBLE
        minValue: 0.0001
        maxValue: 0.1
        scaleType: UNIT_LOG_SCALE
      - <<: *rate
        parameterName: decay
      - parameterName: layers
        type: DISCRETE
        discreteValues: &sizes [1, 2, 4, 8]
      - parameterName: units
        type: DISCRETE
        discreteValues: *sizes
"""
