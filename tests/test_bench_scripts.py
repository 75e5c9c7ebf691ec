"""Every benchmark still loads: the suite does not run them (they take minutes and want a quiet
machine), so a helper that moved would otherwise break one unnoticed until someone measures."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each script's module-level code (its imports, its constants) without its ``main()``.
LOAD_ALL = """
import runpy, sys
for path in sys.argv[1:]:
    runpy.run_path(path, run_name="loaded_by_the_test_suite")
    print("loaded", path, flush=True)
"""


def test_every_benchmark_script_loads():
    scripts = sorted(str(path) for path in (ROOT / "bench").glob("*.py") if path.name != "__init__.py")
    assert len(scripts) >= 10
    result = subprocess.run([sys.executable, "-c", LOAD_ALL, *scripts], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("loaded ") == len(scripts)
