"""Built-in algorithm job bodies and the tabular data they train on."""

from __future__ import annotations

import random

from django.conf import settings

BOOSTED_TREES = "gcr.io/cloud-ml-algos/boosted_trees:latest"


LINEAR_LEARNER = "gcr.io/cloud-ml-algos/linear_learner_cpu:latest"


def classification_rows(count: int, seed: int = 1, *, missing: float = 0.0) -> list[str]:
    """target,x1,x2,colour,row id,constant: the target depends on x1, x2 and the colour."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        x1, x2, colour = rng.gauss(0, 1), rng.uniform(0, 10), rng.choice(["red", "green", "blue"])
        label = 1 if x1 + (x2 > 5) + (colour == "red") + rng.gauss(0, 0.3) > 1 else 0
        x2_text = "" if rng.random() < missing else f"{x2:.3f}"
        rows.append(f"{label},{x1:.4f},{x2_text},{colour},{index + 1},same")
    return rows


def regression_rows(count: int, seed: int = 2) -> list[str]:
    """target = 3·x1 + 0.5·x2 + noise, all numeric."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        x1, x2 = rng.gauss(0, 1), rng.uniform(0, 10)
        rows.append(f"{3 * x1 + 0.5 * x2 + rng.gauss(0, 0.1):.4f},{x1:.4f},{x2:.4f}")
    return rows


def builtin_body(job_id: str, image: str, args: list[str], job_dir: str | None = None, **training_input) -> dict:
    ti = {
        "scaleTier": "BASIC",
        "region": "us-central1",
        "masterConfig": {"imageUri": image},
        "args": args,
        **training_input,
    }
    if job_dir is not None:
        ti["jobDir"] = job_dir
    return {"jobId": job_id, "trainingInput": ti}


def job_dir_for(name: str) -> str:
    return str(settings.STORAGE_DIR / "job-dirs" / "project-a" / name)
