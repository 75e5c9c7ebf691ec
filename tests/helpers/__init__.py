"""What tests share: plain functions and constants, imported by name (fixtures live in conftest.py
files, and in tests/fixtures/ when several folders use them).

- ``algorithms``: Built-in algorithm job bodies and the tabular data they train on.
- ``browser``: Driving the console in Chromium: signing in, axe checks, waiting on the page, and page states.
- ``cli``: Running the aiconsole CLI against a console, and the trainers it submits.
- ``console``: A real `aiconsole up` in a subprocess, and tokens for it.
- ``identity``: Users, roles, bearer headers and audit entries for tests of identity and IAM.
- ``jobs``: Job bodies, submitted jobs, and real trainer packages (sdists and wheels) built on the fly.
- ``logs``: Stored log lines and log WebSocket clients.
- ``memory``: How much memory a process took: its peak resident size while something ran, sampled.
- ``metrics``: Trainers that report metrics, and stored metric points.
- ``models``: Saved model files and deployed versions for the prediction tests.
- ``waiting``: Waiting on a condition with a timeout, never sleeping and hoping.
- ``yaml_bombs``: YAML documents that must be refused before anything expands them, and a config that must not.
"""
