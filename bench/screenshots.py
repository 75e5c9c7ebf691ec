"""Screenshots of the console's main pages into docs/screenshots/, from a real console.

It starts its own ``aiconsole up`` with a throw-away data dir, runs a tuning study and a
model-training job for real, deploys the model, and photographs each main page in Debian's
Chromium (light, and a few in dark mode, which follows the system setting; two at a 390 px phone's width).

Run: ``.venv/bin/python bench/screenshots.py`` (about a minute with the runtime environment cached).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402
from bench.support import harness, trainers  # noqa: E402

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
VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


def prepare(console: harness.LiveConsole) -> None:
    console.add_user("dana", "dana-password-1", role="roles/ml.developer")
    trainers.start_background_jobs(console)
    streamer = trainers.package(
        console.storage / "browser-packages" / "default-project" / "custom", trainers.STREAMING_TASK
    )
    console.submit(
        "custom_1",
        streamer,
        scaleTier="CUSTOM",
        masterType="n1-standard-8",
        workerType="n1-standard-8",
        workerCount="2",
        masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
        workerConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
    )
    for job_id in ("study_1", "train_model", "custom_1"):
        job = console.wait(job_id)
        if job["state"] != "SUCCEEDED":
            raise SystemExit(f"{job_id} ended {job['state']}: {job.get('errorMessage')}")
    console.call("POST", f"/v1{P}/models", {"name": "census", "description": "Census income classifier"})
    console.call(
        "POST",
        f"/v1{P}/models/census/versions",
        {"name": "v1", "deploymentUri": str(console.storage / "out" / "default-project" / "train_model" / "model")},
    )


def main(args: argparse.Namespace) -> None:
    if harness.ensure_chromium() is None:
        raise SystemExit("needs /usr/bin/chromium (scripts/install-chromium)")
    from bench.support.needs_playwright import sync_playwright  # exits naming its install command where missing

    VIEWPORTS["desktop"]["width"] = args.desktop_width
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    chosen = args.env_dir or (Path(os.environ["AICONSOLE_ENV_DIR"]) if os.environ.get("AICONSOLE_ENV_DIR") else None)
    with scratch("aiconsole-screenshots-") as folder:  # as root, trainers run as another user
        say("starting a console; a tuning study, a model's training job and a CUSTOM job run for real")
        console = harness.LiveConsole(folder / "data", env_cache(chosen))
        try:
            prepare(console)
            say(f"photographing {len(PAGES) + 1} pages into {out}")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
                page = browser.new_page(base_url=console.url, viewport=VIEWPORTS["desktop"])
                page.goto("/login/")
                page.screenshot(path=str(out / "sign-in.png"))
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
                    page.screenshot(path=str(out / f"{name}.png"), full_page=name.startswith("tuning") and not viewport)
                    print(f"{out / name}.png  {path} ({scheme})", flush=True)
                browser.close()
        finally:
            console.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the pictures go (default: {OUT})")
    parser.add_argument(
        "--desktop-width", type=int, default=VIEWPORTS["desktop"]["width"], help="the desktop pictures' width in px"
    )
    add_env_dir_flag(parser)
    main(parser.parse_args())
