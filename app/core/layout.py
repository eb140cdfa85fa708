"""The data dir's layout, in one place: every file the service keeps lives at a path from here.

    <data_dir>/
      rollout.db                          the default SQLite database
      checkpoints/<experiment>/...        uploaded checkpoint archives (app/checkpoints/storage.py)
      evaluations/<experiment>/<id>.webm  evaluation replay videos
      jobs/<experiment>/                  a job's local files on this machine (JSONL copy, archives)
      jobs/evaluations/<evaluation>/      an evaluation job's local files
      ray/                                the local Ray head's temp dir (when that path is short)
      ray-head.json                       the record of the local Ray head (app/jobs/head_state.py)

Pure path arithmetic: nothing here touches the disk, so every layer (settings included) can
import it.
"""

from __future__ import annotations

from pathlib import Path

VIDEO_SUFFIXES = {"video/webm": ".webm", "video/mp4": ".mp4"}


def database_file(data_dir: Path) -> Path:
    return data_dir / "rollout.db"


def checkpoints_dir(data_dir: Path) -> Path:
    return data_dir / "checkpoints"


def jobs_dir(data_dir: Path) -> Path:
    """Experiment job dirs are its numbered children; evaluation job dirs sit under
    `evaluations/` (not a number, so never taken for an experiment's)."""
    return data_dir / "jobs"


def experiment_job_dir(data_dir: Path, experiment_id: int) -> Path:
    return (jobs_dir(data_dir) / str(experiment_id)).resolve()


def evaluation_jobs_dir(data_dir: Path) -> Path:
    return jobs_dir(data_dir) / "evaluations"


def evaluation_job_dir(data_dir: Path, evaluation_id: int) -> Path:
    return (evaluation_jobs_dir(data_dir) / str(evaluation_id)).resolve()


def experiment_checkpoints_dir(checkpoints_root: Path, experiment_id: int) -> Path:
    return checkpoints_root / str(experiment_id)


def experiment_file_dirs(
    data_dir: Path, checkpoints_root: Path, experiment_id: int
) -> tuple[Path, ...]:
    """Every folder of one experiment's files on this machine: its checkpoint archives, its
    job's local files and its evaluations' videos (deleting the experiment removes them)."""
    return (
        experiment_checkpoints_dir(checkpoints_root, experiment_id),
        experiment_job_dir(data_dir, experiment_id),
        experiment_videos_dir(data_dir, experiment_id),
    )


def experiment_videos_dir(data_dir: Path, experiment_id: int) -> Path:
    return data_dir / "evaluations" / str(experiment_id)


def video_relative_path(experiment_id: int, evaluation_id: int, media_type: str) -> Path:
    """A video's path relative to the data dir (what the evaluation row stores)."""
    suffix = VIDEO_SUFFIXES[media_type]
    return Path("evaluations") / str(experiment_id) / f"{evaluation_id}{suffix}"


def ray_dir(data_dir: Path) -> Path:
    return (data_dir / "ray").resolve()


def head_record_file(data_dir: Path) -> Path:
    return data_dir / "ray-head.json"


def job_clusters_dir(data_dir: Path) -> Path:
    """Records of the jobs' own Ray clusters (ROLLOUT_JOBS_USERS), the service's alone."""
    return data_dir / "job-clusters"
