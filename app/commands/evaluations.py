"""`rollout evaluate-remote`: evaluate a checkpoint on the service, wait, show the returns.

(`rollout evaluate CHECKPOINT` runs an evaluation locally, without the service: trainer/cli.py.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.client import RolloutClient, WaitTimeout
from app.commands.common import adder, fmt
from trainer.inputs import CliError


def cmd_evaluate_remote(args: argparse.Namespace, client: RolloutClient) -> int:
    """Exit 0 when the evaluation succeeded, 1 when it failed, 3 on timeout."""
    created = client.evaluate(
        args.id,
        args.checkpoint,
        episodes=args.episodes,
        seed=args.seed,
        deterministic=not args.stochastic,
        record_video=not args.no_video,
    )
    print(
        f"evaluation {created.id}: checkpoint {created.checkpoint_id} "
        f"(iteration {created.checkpoint_iteration}), {created.episodes} episodes",
        flush=True,
    )
    if args.no_wait:
        return 0
    try:
        done = client.wait_evaluation(created.id, timeout=args.timeout)
    except WaitTimeout as exc:
        raise CliError(str(exc), code=3) from None
    if done.status.value != "succeeded":
        print(f"status: {done.status.value}\n{done.error or ''}".rstrip())
        return 1
    print(
        f"return mean {fmt(done.return_mean, 2)}  std {fmt(done.return_std, 2)}  "
        f"min {fmt(done.return_min, 2)}  max {fmt(done.return_max, 2)}"
    )
    print("returns " + " ".join(f"{r:g}" for r in done.returns))
    if args.video:
        if done.video is None:
            print(f"no video: {done.video_message or 'none was recorded'}")
        else:
            print(f"video {client.download_video(done.id, Path(args.video))}")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = adder(sub, common)(
        "evaluate-remote",
        cmd_evaluate_remote,
        "evaluate an experiment's checkpoint on the service (a small Ray job)",
    )
    parser.add_argument("id", type=int, help="experiment id")
    parser.add_argument("--checkpoint", default="best", help="best, latest or an id")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stochastic", action="store_true", help="sample actions")
    parser.add_argument("--no-video", action="store_true", help="record no video")
    parser.add_argument("--video", help="save the first episode's video here (.webm)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait")
    parser.add_argument("--no-wait", action="store_true", help="print the id and return")
