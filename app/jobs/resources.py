"""What a job (an experiment's or an evaluation's) needs from the cluster, and whether it fits.

Ray queues a job only on its entrypoint resources; the EnvRunner and Learner actors a driver
creates later do NOT queue: when they do not fit, the job hangs with actors pending forever.
So the service budgets driver + actors together and holds an experiment back (`queued`) until
that whole budget fits the CPUs (and GPUs) that are free right now.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.config import PPOConfig

# A driver that only coordinates remote EnvRunners and Learners needs little CPU; one that
# samples or learns in-process needs a whole one.
COORDINATOR_CPUS = 0.25
WORKING_DRIVER_CPUS = 1.0


@dataclass(frozen=True)
class JobResources:
    """The Ray resources one job uses: its driver plus its actors (an experiment's from its
    config, `of`; an evaluation's are fixed, app/evaluations/scheduling.py)."""

    driver_cpus: float
    driver_gpus: float
    actor_cpus: float
    actor_gpus: float

    @classmethod
    def of(cls, config: PPOConfig) -> JobResources:
        local_work = config.num_env_runners == 0 or config.num_learners == 0
        learns_locally = config.num_learners == 0
        return cls(
            driver_cpus=WORKING_DRIVER_CPUS if local_work else COORDINATOR_CPUS,
            driver_gpus=config.num_gpus_per_learner if learns_locally else 0.0,
            actor_cpus=config.ray_cpus,
            actor_gpus=config.num_learners * config.num_gpus_per_learner,
        )

    @property
    def cpus(self) -> float:
        return self.driver_cpus + self.actor_cpus

    @property
    def gpus(self) -> float:
        return self.driver_gpus + self.actor_gpus

    def describe(self) -> str:
        gpus = f" + {self.gpus:g} GPU" if self.gpus else ""
        return f"{self.cpus:g} CPU{gpus}"


@dataclass(frozen=True)
class ClusterResources:
    """Totals and current usage as Ray's autoscaler reports them (all nodes together)."""

    total_cpus: float
    used_cpus: float
    total_gpus: float = 0.0
    used_gpus: float = 0.0

    def free(self, reserved_cpus: float, reserved_gpus: float) -> tuple[float, float]:
        """Free CPUs/GPUs, counting what running experiments reserved but may not hold yet.

        Ray's usage lags a freshly submitted job (its actors appear seconds later) and counts
        other users of the cluster; our own reservations cover the first, Ray's usage the second.
        """
        cpus = min(self.total_cpus - reserved_cpus, self.total_cpus - self.used_cpus)
        gpus = min(self.total_gpus - reserved_gpus, self.total_gpus - self.used_gpus)
        return max(0.0, cpus), max(0.0, gpus)

    def can_ever_fit(self, need: JobResources) -> bool:
        return need.cpus <= self.total_cpus + 1e-9 and need.gpus <= self.total_gpus + 1e-9


def fits(need: JobResources, free_cpus: float, free_gpus: float) -> bool:
    return need.cpus <= free_cpus + 1e-9 and need.gpus <= free_gpus + 1e-9
