"""The Ray job entrypoint of an evaluation: `python -m trainer.evaluation_job`.

Evaluates one checkpoint for the service and reports to the API with the job's own token, all
inputs from the environment (API URL, token, evaluation id, job dir), never the command line:
1. fetch what to run and report `running`;
2. download the checkpoint archive (as a resuming experiment does: no shared filesystem);
3. run the episodes, posting each one's return and length as they finish (batched, at most
   every FLUSH_S seconds); the first episode is rendered and encoded to a video on the way,
   and the video is uploaded as soon as that episode ends (it plays while the others run);
4. report `succeeded` (with the reason there is no video, if any), or `failed` with the error
   and the traceback tail.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from trainer.api_client import (
    Backoff,
    Failure,
    JobApiClient,
    PermanentError,
    ServerError,
    job_preamble,
    usable_job_dir,
)
from trainer.job_token import job_token
from trainer.wire import (
    ENV_API_URL,
    ENV_EVALUATION_ID,
    ENV_JOB_DIR,
    EpisodeResult,
    EpisodeResults,
    EvaluationSpec,
    EvaluationStatusReport,
)

log = logging.getLogger("trainer.evaluation_job")

FLUSH_S = 0.5


@dataclass(frozen=True)
class EvaluationJobEnv:
    """What the launcher passes in the job's environment."""

    api_url: str
    token: str
    evaluation_id: int
    job_dir: Path

    @classmethod
    def from_environ(cls, environ: Any = os.environ) -> EvaluationJobEnv:
        required = (ENV_API_URL, ENV_EVALUATION_ID)
        missing = [k for k in required if not environ.get(k)]
        if missing:
            raise SystemExit(f"trainer.evaluation_job: missing environment: {', '.join(missing)}")
        evaluation_id = int(environ[ENV_EVALUATION_ID])
        api_url = environ[ENV_API_URL]
        return cls(
            api_url=api_url,
            token=job_token(environ, api_url, f"evaluations/{evaluation_id}"),
            evaluation_id=evaluation_id,
            job_dir=usable_job_dir(environ.get(ENV_JOB_DIR), f"rollout-eval-{evaluation_id}-"),
        )


class JobApi:
    """The evaluation's job routes on the job client (trainer/api_client.py: its retry policy
    and statuses), each call retried until a deadline."""

    def __init__(
        self,
        api_url: str,
        token: str,
        evaluation_id: int,
        *,
        backoff: Backoff | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api = JobApiClient.for_job(
            api_url, token, "evaluations", evaluation_id, backoff=backoff, transport=transport
        )

    def spec(self) -> EvaluationSpec:
        return EvaluationSpec.model_validate(self.api.call("GET").json())

    def report(self, report: EvaluationStatusReport) -> None:
        self.api.call("POST", "/status", json=report.model_dump(mode="json"))

    def post_episodes(self, episodes: list[EpisodeResult]) -> None:
        body = EpisodeResults(episodes=episodes).model_dump(mode="json")
        self.api.call("POST", "/episodes", json=body)

    def download_checkpoint(self, dest: Path) -> Path:
        return self.api.download("/checkpoint", dest, timeout_s=120.0)

    def upload_video(self, path: Path, meta: dict[str, Any]) -> None:
        data = path.read_bytes()  # at most the video cap (2 MB)
        headers = {"Content-Type": meta["media_type"]}
        self.api.call("PUT", "/video", params=meta, content=data, headers=headers)

    def close(self) -> None:
        self.api.close()


class EpisodeSender:
    """Collects finished episodes; sends them at most every `flush_s` seconds (and at the end)."""

    def __init__(self, api: JobApi, flush_s: float = FLUSH_S) -> None:
        self.api = api
        self.flush_s = flush_s
        self.pending: list[EpisodeResult] = []
        self.last = time.monotonic()
        self.sent = 0

    def add(self, index: int, episode_return: float, length: int) -> None:
        log.info("episode %d: return %.3f, length %d", index, episode_return, length)
        self.pending.append(
            EpisodeResult(index=index, episode_return=episode_return, length=length)
        )
        if time.monotonic() - self.last >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.api.post_episodes(self.pending)
            self.sent += len(self.pending)
            self.pending = []
        self.last = time.monotonic()


def run(env: EvaluationJobEnv, api: JobApi) -> int:
    """Evaluate and report; returns the process exit code."""
    try:
        spec = api.spec()
        api.report(EvaluationStatusReport(status="running", reason="job started"))
        archive = api.download_checkpoint(env.job_dir / "checkpoint.tar.gz")
        log.info("evaluating checkpoint %d: %d episodes", spec.checkpoint_id, spec.episodes)
        reason, video_message = _evaluate(env, api, spec, archive)
        api.report(
            EvaluationStatusReport(status="succeeded", reason=reason, video_message=video_message)
        )
        return 0
    except Exception as exc:
        failure = Failure.of(exc, "evaluation")
        try:
            report = EvaluationStatusReport(
                status="failed", reason="job raised", error=failure.error, log_tail=failure.log_tail
            )
            api.report(report)
        except Exception:
            log.exception("could not report the failure; the service reads Ray's job log instead")
        return 1


def _evaluate(
    env: EvaluationJobEnv, api: JobApi, spec: EvaluationSpec, archive: Path
) -> tuple[str, str | None]:
    """Run the episodes and upload the video; (reason for the final status, video message)."""
    from trainer.evaluation import evaluate
    from trainer.video import VideoInfo, VideoLimits

    video = env.job_dir / "video.webm" if spec.record_video else None
    limits = VideoLimits(max_bytes=spec.video_max_bytes, max_frames=spec.video_max_frames)
    sender = EpisodeSender(api)
    messages: list[str] = []

    def upload(info: VideoInfo | None, message: str | None) -> None:
        """Right after the first episode: the video plays while the other episodes run."""
        if message:
            messages.append(message)
        if video is None or info is None:
            return
        meta = {k: v for k, v in info.to_dict().items() if k != "size_bytes"}
        try:
            api.upload_video(video, meta)
        except (PermanentError, ServerError) as exc:
            messages.append(f"the video could not be stored: {exc}")

    result = evaluate(
        archive,
        spec.episodes,
        seed=spec.seed,
        deterministic=spec.deterministic,
        video=video,
        video_limits=limits,
        on_episode=sender.add,
        on_video=upload,
    )
    sender.flush()
    message = messages[-1] if messages else None
    reason = f"{spec.episodes} episodes, return {result.mean:.2f} ± {result.std:.2f}"
    if not math.isfinite(result.mean):
        reason = f"{spec.episodes} episodes"
    return reason, message


def main() -> int:
    job_preamble(preload="trainer.evaluation")
    env = EvaluationJobEnv.from_environ()
    api = JobApi(env.api_url, env.token, env.evaluation_id)
    log.info("evaluation %d, job dir %s", env.evaluation_id, env.job_dir)
    try:
        return run(env, api)
    finally:
        api.close()
        shutil.rmtree(env.job_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
