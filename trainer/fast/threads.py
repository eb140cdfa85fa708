"""The torch thread count of the hand-written SGD step, timed epoch by epoch (`ThreadChoice`)."""

from __future__ import annotations


class ThreadChoice:
    """Whether one torch thread or `n` runs SGD faster, measured epoch by epoch as a run goes.

    Why measured: whether a second thread pays changes with the machine, and on a shared
    machine with its load. On one two-core virtual machine two threads took HalfCheetah's
    64 x 256 x 256 products from 90 to 55 us in one measurement and not at all (88 us) in
    another, when a two-thread SGD phase took 270 ms against one thread's 150 (its threads wait
    on each other); with a third process on the two cores a two-thread epoch took a hundred
    times longer. So the options are timed on whole epochs: each in turn at first, then the
    faster one, with the slower one timed again after `recheck` epochs, an interval that doubles
    (up to `max_recheck`) every time it is still the slower. The numbers are the same either
    way: the products split their output rows between threads, not their sums
    (tests/trainer/test_hand_grad.py checks this).
    """

    def __init__(self, n: int, recheck: int = 64, max_recheck: int = 4096) -> None:
        self.options = (1, n) if n > 1 else (1,)
        self.recheck, self.max_recheck = recheck, max_recheck
        self.interval = recheck  # epochs until the slower option is timed again
        self.seconds: dict[int, float] = {}  # last seconds per minibatch step, by threads
        self.best = 1
        self.since = 0  # epochs since the slower option was last timed

    def pick(self) -> int:
        untried = [k for k in self.options if k not in self.seconds]
        if untried:
            return untried[0]
        if len(self.options) > 1 and self.since >= self.interval:
            return next(k for k in self.options if k != self.best)
        return self.best

    def record(self, threads: int, seconds_per_step: float) -> None:
        first_round = len(self.seconds) < len(self.options)
        self.seconds[threads] = seconds_per_step
        if len(self.seconds) < len(self.options):
            return
        best = min(self.options, key=self.seconds.__getitem__)
        if not first_round and threads != self.best and best == self.best:
            # A recheck of the slower option found it slower still: look again less often.
            self.interval = min(self.interval * 2, self.max_recheck)
        elif first_round or best != self.best:  # a first choice, or a changed one
            self.interval = self.recheck
        else:
            self.since += 1
            return
        self.best, self.since = best, 0
