"""Fast implementations of the trainer's hot paths, for small MLPs on a CPU.

Every preset of the speed table is a small MLP on a CPU, where eager torch pays microseconds of
dispatch per operation for nanoseconds of arithmetic. Each module here computes what a torch
reference computes, without that overhead:

- `policy.py`: an EnvRunner's (and an evaluation's) forward pass and draws in numpy; the
  reference is `PPOModule.sample` (trainer/policy.py chooses).
- `step.py`: the Learner's SGD step with the PPO loss's gradients written out by hand
  (`hand_grad.py`, over `batch.py`'s numpy views), clipping and Adam over one flat buffer
  (`flat_adam.py`), the torch thread count timed per epoch (`threads.py`), and the GAE value
  pass (`values.py`); the reference is trainer/autograd_step.py (trainer/sgd_step.py chooses).
- `distributions.py`: the numpy distribution maths the policy and the hand-written step share.

The references stay the definition: tests compare each fast implementation with its reference,
and ROLLOUT_REFERENCE_PATHS=1 (`switch.py`) runs the references everywhere.
"""
