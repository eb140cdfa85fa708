"""The Ray job entrypoint the service launches: `python -m trainer.job`.

Runs one experiment and reports everything to the API over HTTP with the job's own token. All
inputs come from the environment (never the command line, which Ray shows to everyone): the API
URL, the experiment id and a one-time claim exchanged for the job token (trainer/job_token.py);
the config itself is fetched from the API, so a job on another node of the cluster needs no
shared filesystem.

Lifecycle as seen by the API: `running` once the job starts; metrics and a progress log line
every iteration; a checkpoint every `checkpoint_every` iterations and at the end; finally
`succeeded` (with the stop criterion met), `stopped` (SIGTERM from `stop_job`: a final checkpoint
is saved and uploaded first) or `failed` (with the error and the traceback tail). A final status
the API cannot take (it stayed down past the reporter's patience) is left in the job dir for the
API to settle the run with once it is back (app/jobs/salvage.py); the job still exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from trainer.api_client import Failure, job_preamble, usable_job_dir
from trainer.config import PPOConfig
from trainer.job_token import job_token
from trainer.loop import ArchiveCheckpoints, ReporterSink, progress_line, run_loop
from trainer.reporter import Reporter, status_report
from trainer.wire import (
    API_PREFIX,
    ENV_API_URL,
    ENV_EXPERIMENT_ID,
    ENV_JOB_DIR,
    FINAL_STATUS_FILE,
    ExperimentSpec,
    FinalStatusRecord,
)

if TYPE_CHECKING:
    from trainer.algorithm import PPO

__all__ = ["ExperimentRun", "JobEnv", "StopFlag", "main", "progress_line"]

log = logging.getLogger("trainer.job")

# How long the end of a run waits for the reporter to deliver what it holds (and then for the
# final status to get through); ROLLOUT_REPORTER_PATIENCE_S sets it.
FLUSH_TIMEOUT_S = 60.0
ENV_PATIENCE = "ROLLOUT_REPORTER_PATIENCE_S"
ORPHAN_FLUSH_TIMEOUT_S = 5.0


def reporter_patience_s(environ: dict[str, str] | os._Environ[str] = os.environ) -> float:
    """FLUSH_TIMEOUT_S, or ROLLOUT_REPORTER_PATIENCE_S when set to a positive number."""
    raw = environ.get(ENV_PATIENCE, "")
    try:
        value = float(raw)
    except ValueError:
        if raw:
            log.warning("ignoring %s=%r: not a number", ENV_PATIENCE, raw)
        return FLUSH_TIMEOUT_S
    return value if value > 0 else FLUSH_TIMEOUT_S


@dataclass(frozen=True)
class JobEnv:
    """What the launcher passes in the job's environment."""

    api_url: str
    token: str
    experiment_id: str
    job_dir: Path

    @classmethod
    def from_environ(cls, environ: dict[str, str] | os._Environ[str] = os.environ) -> JobEnv:
        """Read the launcher's variables; a launched job redeems its claim for its token here."""
        missing = [k for k in (ENV_API_URL, ENV_EXPERIMENT_ID) if not environ.get(k)]
        if missing:
            raise SystemExit(f"trainer.job: missing environment variables: {', '.join(missing)}")
        exp_id = environ[ENV_EXPERIMENT_ID]
        return cls(
            api_url=environ[ENV_API_URL],
            token=job_token(environ, environ[ENV_API_URL], f"experiments/{exp_id}"),
            experiment_id=exp_id,
            job_dir=usable_job_dir(environ.get(ENV_JOB_DIR), f"rollout-job-{exp_id}-"),
        )


class StopFlag:
    """Set by SIGTERM/SIGINT (`stop_job`) or when the job's parent dies; the loop checks it
    between iterations and stops cleanly.

    Ray runs the driver in a session of its own under the job supervisor. If the supervisor
    goes away (its node or the whole cluster shut down) nobody would ever stop the driver:
    it notices that it was re-parented and stops itself, without waiting long for an API
    that may be gone too.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.orphaned = False

    def install(self, poll_s: float = 1.0) -> None:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        parent = os.getppid()
        watchdog = threading.Thread(target=self._watch_parent, args=(parent, poll_s))
        watchdog.daemon = True
        watchdog.start()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        log.warning("received %s: stopping after this iteration", signal.Signals(signum).name)
        self._event.set()

    def _watch_parent(self, parent: int, poll_s: float) -> None:
        while not self._event.wait(poll_s):
            if os.getppid() != parent:
                log.warning("the job supervisor (pid %d) is gone: stopping", parent)
                self.orphaned = True
                self._event.set()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def flush_timeout_s(self) -> float:
        return ORPHAN_FLUSH_TIMEOUT_S if self.orphaned else reporter_patience_s()


class ExperimentRun:
    """One experiment's run: the shared training loop (trainer/loop.py) with the reporter's
    sinks, then the final report to the API."""

    def __init__(self, env: JobEnv, reporter: Reporter, stop_flag: StopFlag) -> None:
        self.env = env
        self.reporter = reporter
        self.stop_flag = stop_flag
        self.t0 = time.monotonic()

    def run(self) -> int:
        """Train until a stop criterion or a stop request; returns the process exit code."""
        algo: PPO | None = None
        try:
            spec = self.reporter.fetch_spec()
            config = spec.config
            self.reporter.report_status("running", reason="job started")
            algo = self._build(config, spec)
            outcome = run_loop(
                algo,
                sinks=[ReporterSink(self.reporter)],
                checkpoints=ArchiveCheckpoints(self.env.job_dir, self.reporter),
                checkpoint_every=config.checkpoint_every,
                stop_requested=lambda: self.stop_flag.is_set,
            )
            self._finish(outcome.reason or "stop requested")
            return 0
        except Exception as exc:
            self._fail(Failure.of(exc, "experiment"))
            return 1
        finally:
            if algo is not None:
                algo.stop()

    def _build(self, config: PPOConfig, spec: ExperimentSpec) -> PPO:
        from trainer.algorithm import PPO

        checkpoint_id = spec.resume_from_checkpoint_id
        if checkpoint_id is None:
            return PPO(config, start_time=self.t0)
        archive = self.env.job_dir / "resume_from.tar.gz"
        url = f"{API_PREFIX}/jobs/experiments/{self.env.experiment_id}/resume_checkpoint"
        self.reporter.download(url, archive)
        self.reporter.add_log(f"resuming from checkpoint {checkpoint_id}")
        # The new experiment's config wins (e.g. a later stop criterion); counters continue.
        return PPO.from_checkpoint(archive, config, start_time=self.t0)

    def _finish(self, reason: str) -> None:
        """The final status, after the reporter delivered everything or its patience ran out:
        then the status says what did not arrive."""
        if self.stop_flag.orphaned and reason == "stop requested":
            status, reason = "stopped", "stopped: the Ray job supervisor went away"
        elif self.stop_flag.is_set and reason == "stop requested":
            status, reason = "stopped", "stopped by request"
        else:
            status, reason = "succeeded", f"stop criterion met: {reason}"
        self._report_final(status, reason)

    def _fail(self, failure: Failure) -> None:
        self.reporter.add_log(failure.error)
        self._report_final("failed", "job raised", error=failure.error, log_tail=failure.log_tail)

    def _report_final(
        self, status: str, reason: str, *, error: str | None = None, log_tail: str | None = None
    ) -> None:
        """Deliver what the reporter holds, then the final status. An API that stays away
        past the patience does not turn the run's outcome into a failure: the status, with
        what was not delivered, is left in the job dir, and the API settles the experiment
        with it once the job has ended (app/jobs/salvage.py)."""
        timeout_s = self.stop_flag.flush_timeout_s
        undelivered = None if self.reporter.close(timeout_s) else self.reporter.undelivered()
        missing = f"; {undelivered.describe()}" if undelivered else ""
        if undelivered:
            log.warning("%s", undelivered.describe())
        try:
            self.reporter.report_status(
                status, reason=reason + missing, error=error, log_tail=log_tail,
                timeout_s=timeout_s,
            )  # fmt: skip
        except Exception as exc:
            record = FinalStatusRecord(
                report=status_report(status, reason, error, log_tail),
                steps=list(undelivered.steps) if undelivered else [],
                checkpoints=list(undelivered.checkpoints) if undelivered else [],
                log_lines=list(undelivered.lines) if undelivered else [],
            )
            path = self.env.job_dir / FINAL_STATUS_FILE
            try:
                tmp = path.with_suffix(".part")
                tmp.write_text(record.model_dump_json())
                os.replace(tmp, path)
            except OSError:
                log.exception("could not report the final status nor leave it in %s", path)
                return
            log.warning(
                "could not report the final status (%s: %s); left it in %s for the service",
                type(exc).__name__,
                exc,
                path,
            )


def main() -> int:
    stop_flag = StopFlag()
    stop_flag.install()
    job_preamble(preload="trainer.algorithm")
    env = JobEnv.from_environ()
    reporter = Reporter(env.api_url, env.token, env.experiment_id, env.job_dir)
    log.info("experiment %s, job dir %s", env.experiment_id, env.job_dir)
    try:
        return ExperimentRun(env, reporter, stop_flag).run()
    finally:
        reporter.shutdown()


if __name__ == "__main__":
    sys.exit(main())
