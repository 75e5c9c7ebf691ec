"""Screenshots of the console's main pages into docs/screenshots/, from a real console.

It starts its own ``aiconsole up`` with a throw-away data dir, runs a tuning study and a
model-training job for real, deploys the model, and photographs each main page in Debian's
Chromium (light, and a few in dark mode, which follows the system setting; two at a 390 px phone's width).

Run: ``.venv/bin/python bench/screenshots.py`` (about a minute with the runtime environment cached).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import harness, trainers  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
P = f"/projects/{harness.PROJECT}"
PAGES = [
    ("jobs", f"{P}/jobs/", "light"),
    ("jobs-dark", f"{P}/jobs/", "dark"),
    ("new-job", f"{P}/jobs/new/", "light"),
    ("job-logs", f"{P}/jobs/custom_1/", "light"),
    ("tuning-study", f"{P}/jobs/study_1/", "light"),
    ("tuning-study-dark", f"{P}/jobs/study_1/", "dark"),
    ("model", f"{P}/models/census/", "light"),
    ("members", f"{P}/members/", "light"),
    ("audit-log", f"{P}/audit/", "light"),
    ("users", "/users/", "light"),
    ("jobs-phone", f"{P}/jobs/", "light", "phone"),
    ("tuning-study-phone-dark", f"{P}/jobs/study_1/", "dark", "phone"),
]
VIEWPORTS = {"desktop": {"width": 1280, "height": 860}, "phone": {"width": 390, "height": 844}}


def prepare(console: harness.LiveConsole) -> None:
    console.add_user("dana", "dana-password-1", role="roles/ml.developer")
    trainers.start_background_jobs(console)
    streamer = trainers.package(console.storage / "browser-packages" / "default-project" / "custom", trainers.STREAMING_TASK)
    console.submit("custom_1", streamer, scaleTier="CUSTOM", masterType="n1-standard-8", workerType="n1-standard-8",
                   workerCount="2", masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
                   workerConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}})
    for job_id in ("study_1", "train_model", "custom_1"):
        job = console.wait(job_id)
        if job["state"] != "SUCCEEDED":
            raise SystemExit(f"{job_id} ended {job['state']}: {job.get('errorMessage')}")
    console.call("POST", f"/v1{P}/models", {"name": "census", "description": "Census income classifier"})
    console.call("POST", f"/v1{P}/models/census/versions", {
        "name": "v1", "deploymentUri": str(console.storage / "out" / "default-project" / "train_model" / "model")})


def main() -> None:
    if harness.ensure_chromium() is None:
        raise SystemExit("needs /usr/bin/chromium (scripts/install-chromium)")
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    env_dir = os.environ.get("AICONSOLE_ENV_DIR")
    with tempfile.TemporaryDirectory(prefix="aiconsole-screenshots-") as scratch:
        os.chmod(scratch, 0o711)  # as root, trainers run as another user, who must reach the data dir
        console = harness.LiveConsole(Path(scratch) / "data", Path(env_dir) if env_dir else None)
        try:
            prepare(console)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
                page = browser.new_page(base_url=console.url, viewport={"width": 1280, "height": 860})
                page.goto("/login/")
                page.screenshot(path=str(OUT / "sign-in.png"))
                page.get_by_label("Username").fill("admin")
                page.get_by_label("Password").fill(harness.ADMIN_PASSWORD)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url("**/jobs/")
                for name, path, scheme, *viewport in PAGES:
                    page.set_viewport_size(VIEWPORTS[viewport[0] if viewport else "desktop"])
                    page.emulate_media(color_scheme=scheme)
                    page.goto(path, wait_until="load")
                    if name == "model":
                        page.locator("tr[data-version=v1] [data-state=READY]").wait_for(timeout=120_000)
                        page.reload()
                    page.wait_for_timeout(300)  # charts finish drawing
                    page.screenshot(path=str(OUT / f"{name}.png"), full_page=name.startswith("tuning") and not viewport)
                    print(f"docs/screenshots/{name}.png  {path} ({scheme})")
                browser.close()
        finally:
            console.stop()


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # --help, and nothing else
    main()
