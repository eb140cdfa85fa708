"""Evaluation speed: POST -> video playable, for a CartPole checkpoint (target < 15 s on 2
cores, video < 2 MB).

Starts `rollout serve` as a user does (SQLite, its own local Ray head), trains a CartPole
experiment through the service until its mean return reaches `--train-return` (so episodes are
long: up to 500 steps, a 501-frame video), then POSTs `--repeats` evaluations of its best
checkpoint one after the other and prints each one's timeline:

    created -> queued -> submitted to Ray -> job started -> video uploaded -> video
    downloaded and decoded ("playable") -> episodes done -> succeeded

The job uploads the video as soon as the first episode ends, so it plays while the other
episodes run. Server-side times (created, submitted, job started, finished) come from the
evaluation's own timestamps; the others are when a poll (every 25 ms) first saw them.

    .venv/bin/python -m benchmarks.evaluation_bench [--episodes 10] [--repeats 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.serve_process import rollout_serve
from trainer.video import probe

TARGET_S = 15.0
MAX_VIDEO_BYTES = 2_000_000
POLL_S = 0.025


def train(api: httpx.Client, target_return: float, timeout_s: float) -> int:
    config = {
        "env_id": "CartPole-v1",
        "stop": {"episode_return_mean": target_return, "env_steps": 300_000},
        "checkpoint_every": 5,
    }
    response = api.post("/experiments", json={"name": "evaluation bench", "config": config})
    response.raise_for_status()
    exp_id = response.json()["id"]
    deadline = time.monotonic() + timeout_s
    while True:
        exp = api.get(f"/experiments/{exp_id}").json()
        if exp["status"] in ("succeeded", "failed", "stopped"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"training did not finish in {timeout_s:.0f} s")
        time.sleep(0.5)
    if exp["status"] != "succeeded":
        raise SystemExit(f"training ended {exp['status']}: {exp['error']}")
    print(f"trained experiment {exp_id}: best return {exp['best_return']}", flush=True)
    return exp_id


def _at(value: str | None) -> float | None:
    return dt.datetime.fromisoformat(value).timestamp() if value else None


def evaluate_once(
    api: httpx.Client, exp_id: int, episodes: int, seed: int, workdir: Path, timeout_s: float
) -> dict[str, Any]:
    """One evaluation, POST to playable video; returns its timeline (seconds after the POST)."""
    t0 = time.time()
    response = api.post(
        f"/experiments/{exp_id}/evaluations",
        json={"checkpoint": "best", "episodes": episodes, "seed": seed, "record_video": True},
    )
    response.raise_for_status()
    eid = response.json()["id"]
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while True:
        now = time.time()
        ev = api.get(f"/evaluations/{eid}").json()
        if ev["status"] == "queued":
            seen.setdefault("queued", now)
        if ev["episodes_done"] >= episodes:
            seen.setdefault("episodes done", now)
        if ev["video"] is not None and "video uploaded" not in seen:
            seen["video uploaded"] = now
            # What a browser does: download it and decode it (here: every frame).
            video = workdir / f"evaluation-{eid}.webm"
            video.write_bytes(api.get(f"/evaluations/{eid}/video").content)
            decoded = probe(video)
            assert decoded["frames"] == ev["video"]["frames"], decoded
            seen["video playable"] = time.time()
        if ev["status"] in ("succeeded", "failed"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"evaluation {eid} did not end in {timeout_s:.0f} s: {ev['status']}")
        time.sleep(POLL_S)
    if ev["status"] != "succeeded" or ev["video"] is None:
        raise SystemExit(f"evaluation {eid}: {ev['status']} {ev['error']} {ev['video_message']}")
    playable = seen["video playable"]
    events = {
        "created": _at(ev["created_at"]),
        "queued": seen.get("queued"),
        "submitted to Ray": _at(ev["started_at"]),
        "job started": _at(ev["job_started_at"]),
        "episodes done": seen.get("episodes done"),
        "video uploaded": seen.get("video uploaded"),
        "video playable": playable,
        "succeeded": _at(ev["finished_at"]),
    }
    ordered = sorted((v, k) for k, v in events.items() if v is not None)
    timeline = {k: round(v - t0, 3) for v, k in ordered}
    return {
        "evaluation_id": eid,
        "episodes": episodes,
        "mean_return": ev["return_mean"],
        "mean_length": sum(ev["lengths"]) / len(ev["lengths"]),
        "video": {k: ev["video"][k] for k in ("codec", "size_bytes", "frames", "fps")},
        "timeline_s": timeline,
        "post_to_playable_s": round(playable - t0, 3),
    }


def report(result: dict[str, Any]) -> None:
    video = result["video"]
    print(
        f"\nevaluation {result['evaluation_id']}: {result['episodes']} episodes, mean return "
        f"{result['mean_return']:.1f} (mean length {result['mean_length']:.0f}); video "
        f"{video['codec']} {video['frames']} frames, {video['size_bytes'] / 1024:.0f} KiB"
    )
    for name, seconds in result["timeline_s"].items():
        print(f"  +{seconds:7.3f} s  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-return", type=float, default=475.0)
    parser.add_argument("--train-timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rollout-eval-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "data").mkdir()
        with (
            rollout_serve(workdir / "data", env={"ROLLOUT_API_TOKEN": None}) as served,
            httpx.Client(base_url=f"{served.url}/api/v1", timeout=30) as api,
        ):
            exp_id = train(api, args.train_return, args.train_timeout)
            results = []
            for seed in range(args.repeats):
                results.append(evaluate_once(api, exp_id, args.episodes, seed, workdir, 120))
                report(results[-1])
    times = [r["post_to_playable_s"] for r in results]
    sizes = [r["video"]["size_bytes"] for r in results]
    median = statistics.median(times)
    ok = median < TARGET_S and max(sizes) < MAX_VIDEO_BYTES
    print(
        f"\nPOST -> video playable: median {median:.2f} s (min {min(times):.2f}, max "
        f"{max(times):.2f}); largest video {max(sizes) / 1024:.0f} KiB; target < {TARGET_S:g} s "
        f"and < 2 MB: {'met' if ok else 'NOT met'}"
    )
    if args.json:
        summary = {"median_s": median, "results": results, "target_met": ok}
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
