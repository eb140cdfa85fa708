"""`RolloutClient`: the Python client of the Rollout API (httpx), used by the `rollout` CLI.

Every method is one API call (or a loop of them: `wait`, `iter_experiments`) and returns the
service's own wire models (app/*/schemas.py). Errors are `APIError` (the service's error
envelope), `ServiceUnreachable` (no answer) or `WaitTimeout`. The API token travels in the
Authorization header only, never in a URL (websockets included). Importing this module loads
neither torch nor gymnasium nor SQLAlchemy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from app.checkpoints.schemas import CheckpointPublic
from app.client.errors import APIError, ServiceUnreachable, WaitTimeout
from app.client.live import LiveMessage, parse_message
from app.evaluations.schemas import EvaluationDetail, EvaluationPublic
from app.experiments.schemas import (
    EventPublic,
    ExperimentDetail,
    ExperimentPage,
    ExperimentPublic,
    LogsPublic,
)
from app.metrics.schemas import MetricNames, Series, SeriesResponse
from app.presets.schemas import PresetList, ResolvedConfig
from app.references.schemas import ReferenceCurves, ReferenceList
from app.studies.schemas import StudyBest, StudyDetail, StudyList
from app.sweeps.schemas import SweepDetail, SweepList, SweepMetrics
from trainer.wire import API_PREFIX

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
CheckpointRef = Literal["best", "latest"] | int | str
# An export asks for few series at once, so each gets a large share of a response's points.
EXPORT_NAMES_PER_REQUEST = 8

M = TypeVar("M", bound=BaseModel)
_CHECKPOINTS = TypeAdapter(list[CheckpointPublic])
_EVENTS = TypeAdapter(list[EventPublic])
_EVALUATIONS = TypeAdapter(list[EvaluationPublic])


class RolloutClient:
    """A connection to one Rollout service.

    `url` is the service's root (``http://host:8000``); `token` its API token, if it has one.
    `timeout` applies to every plain request (seconds or an ``httpx.Timeout``); downloads and
    streams have no overall limit, only the read timeout between chunks. Pass `http` to use your
    own ``httpx.Client`` (its base URL must be the service root; tests pass the ASGI test client).
    Use it as a context manager, or call `close()`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token or None
        self._owns_http = http is None
        self.http = http or httpx.Client(base_url=self.url, timeout=timeout)
        if self.token:
            self.http.headers["Authorization"] = f"Bearer {self.token}"

    @classmethod
    def from_env(cls, **kwargs: Any) -> RolloutClient:
        """URL from ROLLOUT_URL (default http://127.0.0.1:8000), token from ROLLOUT_API_TOKEN."""
        url = os.environ.get("ROLLOUT_URL", DEFAULT_URL)
        return cls(url, os.environ.get("ROLLOUT_API_TOKEN"), **kwargs)

    def close(self) -> None:
        if self._owns_http:
            self.http.close()

    def __enter__(self) -> RolloutClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transport -------------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call to `/api/v1{path}`; an error status raises `APIError`."""
        try:
            response = self.http.request(method, API_PREFIX + path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if not response.is_success:
            raise APIError.from_response(response)
        return response

    def _model(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        return model.model_validate_json(self.request(method, path, **kwargs).content)

    def _unreachable(self, exc: Exception) -> ServiceUnreachable:
        return ServiceUnreachable(
            f"cannot reach the Rollout service at {self.url} ({exc.__class__.__name__}: {exc}). "
            "Is `rollout serve` running? Set --url or ROLLOUT_URL."
        )

    def _download(self, path: str, target: Path, default_name: str) -> Path:
        """Stream a file to `target` (a file, or a directory to put it in under the server's
        file name); written to `<name>.part` and renamed, so a broken transfer leaves no file."""
        try:
            with self.http.stream("GET", API_PREFIX + path) as response:
                if not response.is_success:
                    response.read()
                    raise APIError.from_response(response)
                if target.is_dir():
                    target = target / (_filename(response) or default_name)
                part = target.with_name(target.name + ".part")
                try:
                    with part.open("wb") as f:
                        for chunk in response.iter_bytes(1 << 20):
                            f.write(chunk)
                    part.replace(target)
                finally:
                    part.unlink(missing_ok=True)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        return target

    # --- experiments -----------------------------------------------------------------------------

    def submit(
        self,
        config: Mapping[str, Any] | BaseModel,
        name: str,
        tags: Iterable[str] = (),
        *,
        evaluation_every: int = 0,
    ) -> ExperimentDetail:
        """Store and queue an experiment. `config` is a PPOConfig or a dict of its fields; the
        service fills the rest from the env's preset and PPOConfig's defaults (a PPOConfig
        sends only the fields that were set). A bad config is a 422 naming `config.<field>`.
        `evaluation_every`: a video of every N-th checkpoint as it trains (0: none)."""
        if isinstance(config, BaseModel):
            body_config = config.model_dump(mode="json", exclude_unset=True)
        else:
            body_config = dict(config)
        body = {
            "name": name,
            "config": body_config,
            "tags": list(tags),
            "evaluation_every": evaluation_every,
        }
        return self._model(ExperimentDetail, "POST", "/experiments", json=body)

    def list_experiments(
        self,
        *,
        status: str | Iterable[str] | None = None,
        tag: str | None = None,
        tag_contains: str | None = None,
        name: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ExperimentPage:
        """One page, newest first; pass `page.next_cursor` back for the next one. `tag` is
        exact, `tag_contains` and `name` match a part (ignoring case)."""
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = [status] if isinstance(status, str) else list(status)
        filters = (("tag", tag), ("tag_contains", tag_contains), ("name", name), ("cursor", cursor))
        for key, value in filters:
            if value is not None:
                params[key] = value
        return self._model(ExperimentPage, "GET", "/experiments", params=params)

    def iter_experiments(self, **filters: Any) -> Iterator[ExperimentPublic]:
        """Every experiment matching the filters of `list_experiments`, page after page."""
        cursor = None
        while True:
            page = self.list_experiments(cursor=cursor, **filters)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get(self, experiment_id: int) -> ExperimentDetail:
        return self._model(ExperimentDetail, "GET", f"/experiments/{experiment_id}")

    def events(self, experiment_id: int) -> list[EventPublic]:
        return _EVENTS.validate_json(
            self.request("GET", f"/experiments/{experiment_id}/events").content
        )

    def stop(self, experiment_id: int) -> ExperimentPublic:
        """Pending / queued: stopped at once; running: `stopping`; finished: 409."""
        return self._model(ExperimentPublic, "POST", f"/experiments/{experiment_id}/stop")

    def resume(
        self, experiment_id: int, *, stop: Mapping[str, Any] | None = None
    ) -> ExperimentDetail:
        """A new experiment that continues from this one's latest checkpoint; `stop` replaces
        those stop criteria (``{"env_steps": 200_000}``: env steps in all, counting on)."""
        body = {"stop": dict(stop)} if stop else None
        path = f"/experiments/{experiment_id}/resume"
        return self._model(ExperimentDetail, "POST", path, json=body)

    def fork(
        self,
        experiment_id: int,
        overrides: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        tags: Iterable[str] | None = None,
        evaluation_every: int | None = None,
    ) -> ExperimentDetail:
        """A new experiment with this config and `overrides` merged in (nested dicts merge);
        name, tags and evaluation_every are the source's unless given."""
        body = _given(
            overrides=dict(overrides or {}),
            name=name,
            tags=None if tags is None else list(tags),
            evaluation_every=evaluation_every,
        )
        return self._model(
            ExperimentDetail, "POST", f"/experiments/{experiment_id}/fork", json=body
        )

    def update(
        self,
        experiment_id: int,
        *,
        name: str | None = None,
        tags: Iterable[str] | None = None,
        notes: str | None = None,
    ) -> ExperimentDetail:
        """Rename, retag (replaces the tags) or annotate (notes, markdown; "" clears them) an
        experiment; what is left None stays as it is."""
        body = _given(name=name, tags=None if tags is None else list(tags), notes=notes)
        return self._model(ExperimentDetail, "PATCH", f"/experiments/{experiment_id}", json=body)

    def delete(self, experiment_id: int) -> None:
        """Finished experiments only (409 otherwise): its metrics, checkpoints, videos go too."""
        self.request("DELETE", f"/experiments/{experiment_id}")

    def logs(self, experiment_id: int, tail: int = 200) -> list[str]:
        path = f"/experiments/{experiment_id}/logs"
        return self._model(LogsPublic, "GET", path, params={"tail": tail}).lines

    def wait(
        self, experiment_id: int, timeout: float | None = None, poll_s: float = 1.0
    ) -> ExperimentDetail:
        """Poll until the experiment has ended (succeeded, failed or stopped) and return it;
        `WaitTimeout` after `timeout` seconds (None: no limit). Check `.status` for the outcome."""
        return _poll(
            lambda: self.get(experiment_id), timeout, poll_s, f"experiment {experiment_id}"
        )

    def stream(
        self, experiment_id: int, since_step: int = -1, open_timeout: float = 10.0
    ) -> Iterator[LiveMessage]:
        """The experiment's websocket: metrics after `since_step`, its status, recent log lines,
        then live messages until the service closes it (or the caller stops iterating).

        Raises `APIError` when the service refuses it, `ServiceUnreachable` when it cannot be
        opened or breaks; resume with `since_step` set to the last metrics step seen."""
        from websockets.exceptions import InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        base = self.url.replace("http", "ws", 1)
        url = f"{base}{API_PREFIX}/experiments/{experiment_id}/stream?since_step={since_step}"
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            with connect(url, additional_headers=headers, open_timeout=open_timeout) as ws:
                for raw in ws:
                    message = parse_message(raw)
                    if message is not None:
                        yield message
        except InvalidStatus as exc:
            # The service refuses a websocket before accepting it (no handshake, no body).
            status = exc.response.status_code
            raise APIError(
                status,
                "stream_refused",
                f"the service refused the live stream of experiment {experiment_id} (a missing "
                "or wrong API token, or no such experiment)",
            ) from None
        except (OSError, WebSocketException) as exc:
            raise ServiceUnreachable(f"lost the live stream from {self.url}: {exc}") from None

    # --- metrics ---------------------------------------------------------------------------------

    def metrics(
        self,
        experiment_id: int,
        names: Iterable[str] | None = None,
        *,
        max_points: int | None = None,
        step_min: int | None = None,
        step_max: int | None = None,
    ) -> SeriesResponse:
        """Series keyed by env steps (min/max-downsampled beyond `max_points`); all by default."""
        params: dict[str, Any] = {}
        if names is not None:
            params["names"] = ",".join(names)
        for key, value in (
            ("max_points", max_points),
            ("step_min", step_min),
            ("step_max", step_max),
        ):
            if value is not None:
                params[key] = value
        return self._model(
            SeriesResponse, "GET", f"/experiments/{experiment_id}/metrics", params=params
        )

    def metric_names(self, experiment_id: int) -> list[str]:
        return self._model(MetricNames, "GET", f"/experiments/{experiment_id}/metrics/names").names

    def all_metrics(
        self, experiment_id: int, names: Iterable[str] | None = None
    ) -> dict[str, Series]:
        """Every stored point of the series (all by default), never downsampled: a series the
        service had to thin for one response is fetched again in step windows, halved until
        each comes whole (for exports: `rollout metrics ID --csv`)."""
        wanted = list(names) if names is not None else self.metric_names(experiment_id)
        out: dict[str, Series] = {}
        for start in range(0, len(wanted), EXPORT_NAMES_PER_REQUEST):
            batch = wanted[start : start + EXPORT_NAMES_PER_REQUEST]
            response = self.metrics(experiment_id, batch)
            for name, series in response.series.items():
                if response.downsampled.get(name) and series.step:
                    series = self._whole(experiment_id, name, series.step[0], series.step[-1])
                out[name] = series
        return out

    def _whole(self, experiment_id: int, name: str, lo: int, hi: int) -> Series:
        response = self.metrics(experiment_id, [name], step_min=lo, step_max=hi)
        series = response.series.get(name, Series(step=[], value=[]))
        if not response.downsampled.get(name) or hi <= lo:
            return series
        mid = (lo + hi) // 2
        left = self._whole(experiment_id, name, lo, mid)
        right = self._whole(experiment_id, name, mid + 1, hi)
        return Series(step=left.step + right.step, value=left.value + right.value)

    # --- checkpoints -----------------------------------------------------------------------------

    def checkpoints(self, experiment_id: int) -> list[CheckpointPublic]:
        response = self.request("GET", f"/experiments/{experiment_id}/checkpoints")
        return _CHECKPOINTS.validate_json(response.content)

    def download_checkpoint(
        self, experiment_id: int, checkpoint: CheckpointRef = "best", path: str | Path = "."
    ) -> Path:
        """Stream a checkpoint's .tar.gz (`best`, `latest` or an id) to `path` (a file, or a
        directory: then under the service's name, experiment-E-iteration-I.tar.gz)."""
        default = f"experiment-{experiment_id}-{checkpoint}.tar.gz"
        route = f"/experiments/{experiment_id}/checkpoints/{checkpoint}/download"
        return self._download(route, Path(path), default)

    # --- evaluations -----------------------------------------------------------------------------

    def evaluate(
        self,
        experiment_id: int,
        checkpoint: CheckpointRef = "best",
        *,
        episodes: int = 10,
        seed: int = 0,
        deterministic: bool = True,
        record_video: bool = True,
    ) -> EvaluationDetail:
        """Queue an evaluation of a checkpoint (a small Ray job); `wait_evaluation` follows it."""
        body = {
            "checkpoint": checkpoint,
            "episodes": episodes,
            "seed": seed,
            "deterministic": deterministic,
            "record_video": record_video,
        }
        path = f"/experiments/{experiment_id}/evaluations"
        return self._model(EvaluationDetail, "POST", path, json=body)

    def evaluation(self, evaluation_id: int) -> EvaluationDetail:
        return self._model(EvaluationDetail, "GET", f"/evaluations/{evaluation_id}")

    def evaluations(self, experiment_id: int) -> list[EvaluationPublic]:
        response = self.request("GET", f"/experiments/{experiment_id}/evaluations")
        return _EVALUATIONS.validate_json(response.content)

    def wait_evaluation(
        self, evaluation_id: int, timeout: float | None = None, poll_s: float = 0.5
    ) -> EvaluationDetail:
        """Poll until the evaluation succeeded or failed; `WaitTimeout` after `timeout` s."""
        return _poll(
            lambda: self.evaluation(evaluation_id), timeout, poll_s, f"evaluation {evaluation_id}"
        )

    def download_video(self, evaluation_id: int, path: str | Path = ".") -> Path:
        """The evaluation's video (404 with the reason when it has none)."""
        default = f"evaluation-{evaluation_id}.webm"
        return self._download(f"/evaluations/{evaluation_id}/video", Path(path), default)

    def delete_evaluation(self, evaluation_id: int) -> None:
        self.request("DELETE", f"/evaluations/{evaluation_id}")

    # --- presets and references ------------------------------------------------------------------

    def presets(self) -> PresetList:
        return self._model(PresetList, "GET", "/presets")

    def resolve_config(self, config: Mapping[str, Any]) -> ResolvedConfig:
        """The config an experiment with this partial config would get (nothing is stored)."""
        return self._model(
            ResolvedConfig, "POST", "/presets/resolve", json={"config": dict(config)}
        )

    def references(self, env_id: str | None = None) -> list[ReferenceCurves]:
        """Peer learning curves shipped with the service, for one env id or all (may be empty)."""
        params = {"env_id": env_id} if env_id is not None else None
        return self._model(ReferenceList, "GET", "/references", params=params).items

    # --- sweeps ----------------------------------------------------------------------------------

    def submit_sweep(self, sweep: Mapping[str, Any]) -> SweepDetail:
        """Store a sweep (`name`, `config`, `grid`, `seeds`, `max_parallel`) and queue its
        members; a bad key, value or seed is an `APIError` 422 naming it (nothing stored)."""
        return self._model(SweepDetail, "POST", "/sweeps", json=dict(sweep))

    def sweeps(self, limit: int = 100) -> SweepList:
        return self._model(SweepList, "GET", "/sweeps", params={"limit": limit})

    def sweep(self, sweep_id: int) -> SweepDetail:
        return self._model(SweepDetail, "GET", f"/sweeps/{sweep_id}")

    def sweep_metrics(
        self, sweep_id: int, names: Iterable[str] = ("episode_return_mean",), points: int = 200
    ) -> SweepMetrics:
        """Per seed group: mean, min/max and a 95 % bootstrap interval on a common env-steps
        grid, and each group's final values."""
        params = {"names": ",".join(names), "points": points}
        return self._model(SweepMetrics, "GET", f"/sweeps/{sweep_id}/metrics", params=params)

    def stop_sweep(self, sweep_id: int) -> SweepDetail:
        return self._model(SweepDetail, "POST", f"/sweeps/{sweep_id}/stop")

    def delete_sweep(self, sweep_id: int) -> None:
        self.request("DELETE", f"/sweeps/{sweep_id}")

    # --- studies ---------------------------------------------------------------------------------

    def create_study(self, study: Mapping[str, Any]) -> StudyDetail:
        """Store a study (`name`, `config`, `space`, `n_trials`, `max_parallel`, `objective`,
        `sampler`, `pruner`, `seed`); the service then suggests its first `max_parallel`
        trials. A bad range, choice, config field or objective is an `APIError` 422 naming
        it (nothing stored)."""
        return self._model(StudyDetail, "POST", "/studies", json=dict(study))

    def studies(self, limit: int = 100) -> StudyList:
        """Newest first, with trial counts per state and the best value so far."""
        return self._model(StudyList, "GET", "/studies", params={"limit": limit})

    def study(self, study_id: int) -> StudyDetail:
        """Every trial (params, state, intermediate values, value) and the importances."""
        return self._model(StudyDetail, "GET", f"/studies/{study_id}")

    def best_trial(self, study_id: int) -> StudyBest:
        """The best complete trial and its resolved config; `APIError` 404 while none is
        complete."""
        return self._model(StudyBest, "GET", f"/studies/{study_id}/best")

    def stop_study(self, study_id: int) -> StudyDetail:
        """Suggest nothing more and stop the trials that still run."""
        return self._model(StudyDetail, "POST", f"/studies/{study_id}/stop")

    def delete_study(self, study_id: int) -> None:
        """Once every trial has ended (409 otherwise): the study, its trials and their runs."""
        self.request("DELETE", f"/studies/{study_id}")


Finishable = TypeVar("Finishable", ExperimentDetail, EvaluationDetail)


def _poll(
    fetch: Callable[[], Finishable], timeout: float | None, poll_s: float, what: str
) -> Finishable:
    """Call `fetch` until its result's status is finished; back off gently up to 5 s."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = max(0.05, poll_s)
    while True:
        current = fetch()
        if current.status.is_finished:
            return current
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(
                    f"{what} is still {current.status.value} after {timeout:g} s", current
                )
            time.sleep(min(delay, left))
        else:
            time.sleep(delay)
        delay = min(delay * 1.5, max(poll_s, 5.0))


def _filename(response: httpx.Response) -> str | None:
    """The file name of a Content-Disposition header, if it names a plain one."""
    header = response.headers.get("content-disposition", "")
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key.lower() == "filename":
            name = Path(value.strip().strip('"')).name
            return name or None
    return None


def _given(**fields: Any) -> dict[str, Any]:
    """A partial request's body: the fields that are not None (None leaves one as it is)."""
    return {name: value for name, value in fields.items() if value is not None}
