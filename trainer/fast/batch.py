"""NumpyBatch: a train batch as the hand-written SGD step reads it.

The Learner builds a TrainBatch of torch tensors (trainer/batch.py); on a CPU their memory is
numpy's too, so the hand-written step takes the columns as views (no copy) and gathers its
minibatches with numpy's fancy indexing, at a fraction of torch's per-call cost.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields

import numpy as np
import torch

from trainer.batch import TrainBatch


@dataclass(frozen=True)
class NumpyBatch:
    """A TrainBatch's columns as numpy arrays (views of the CPU tensors: no copy)."""

    obs: np.ndarray
    actions: np.ndarray
    logp: np.ndarray
    dist_inputs: np.ndarray
    advantages: np.ndarray
    value_targets: np.ndarray
    values: np.ndarray

    @staticmethod
    def of(batch: TrainBatch) -> NumpyBatch:
        return NumpyBatch(*(getattr(batch, f.name).numpy() for f in fields(TrainBatch)))

    def __len__(self) -> int:
        return len(self.logp)

    def rows(self, index: np.ndarray) -> NumpyBatch:
        return NumpyBatch(*(getattr(self, f.name)[index] for f in fields(NumpyBatch)))

    def split(self, perm: torch.Tensor, sizes: list[int]) -> list[NumpyBatch]:
        """Minibatches of `sizes` rows taken in the order of `perm` (TrainBatch.split)."""
        index = perm.numpy()
        bounds = np.cumsum([0, *sizes])
        return [self.rows(index[a:b]) for a, b in itertools.pairwise(bounds)]

    def standardized(self) -> NumpyBatch:
        """Advantages standardised as TrainBatch.standardized does (unbiased std)."""
        adv = self.advantages
        if len(adv) < 2:
            return self
        centred = adv - adv.mean()
        std = np.sqrt(np.dot(centred, centred) / (len(adv) - 1))
        return NumpyBatch(
            self.obs, self.actions, self.logp, self.dist_inputs,
            centred / (std + np.float32(1e-8)), self.value_targets, self.values,
        )  # fmt: skip
