"""What tests share: plain functions and constants, imported by name (fixtures live in conftest.py
files, and in tests/fixtures/ when several folders use them). What the benchmarks use too (trainer
packages, waiting, container images, saved models, a live console, a scaled cluster) is in
bench/support/, which the tests import.

- ``algorithms``: Built-in algorithm job bodies and the tabular data they train on.
- ``browser``: Driving the console in Chromium: signing in, axe checks, waiting on the page, and page states.
- ``cli``: Running the aiconsole CLI against a console, and the trainers it submits.
- ``console``: A real `aiconsole up` in a subprocess, and tokens for it.
- ``identity``: Users, roles, bearer headers and audit entries for tests of identity and IAM.
- ``images``: The container engine the container tests need (skipped without one, failed in CI).
- ``imports``: The absolute imports a Python file makes, deferred ones included.
- ``jobs``: Job bodies, submitted jobs and their logs.
- ``logs``: Stored log lines and log WebSocket clients.
- ``memory``: How much memory a process took: its peak resident size while something ran, sampled.
- ``metrics``: Trainers that report metrics, and stored metric points.
- ``models``: Deployed versions for the prediction tests.
- ``yaml_bombs``: YAML documents that must be refused before anything expands them, and a config that must not.
"""
