"""EagerAdam: torch.optim.Adam's update and state dict, without importing torch._dynamo."""

from __future__ import annotations

import copy
import subprocess
import sys

import torch

from trainer.optim import EagerAdam


def _run(opt_cls: type[torch.optim.Adam], steps: int) -> tuple[torch.nn.Linear, torch.optim.Adam]:
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    opt = opt_cls(net.parameters(), lr=1e-2, eps=1e-5)
    x = torch.randn(16, 3)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        net(x).square().mean().backward()
        opt.step()
    return net, opt


def test_updates_and_state_match_torch_adam() -> None:
    net_a, opt_a = _run(torch.optim.Adam, 5)
    net_b, opt_b = _run(EagerAdam, 5)
    for pa, pb in zip(net_a.parameters(), net_b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
    sa, sb = opt_a.state_dict(), opt_b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for key in sa["state"]:
        for name, value in sa["state"][key].items():
            torch.testing.assert_close(value, sb["state"][key][name], rtol=0, atol=0)


def test_load_state_dict_resumes_like_torch_adam() -> None:
    _, opt = _run(EagerAdam, 3)
    saved = copy.deepcopy(opt.state_dict())
    results = []
    for opt_cls in (torch.optim.Adam, EagerAdam):
        torch.manual_seed(1)
        net = torch.nn.Linear(3, 2)
        resumed = opt_cls(net.parameters(), lr=1e-2, eps=1e-5)
        resumed.load_state_dict(copy.deepcopy(saved))
        net(torch.ones(4, 3)).sum().backward()
        resumed.step()
        results.append([p.detach().clone() for p in net.parameters()])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_step_runs_without_autograd_recording() -> None:
    net = torch.nn.Linear(2, 1)
    opt = EagerAdam(net.parameters())
    net(torch.ones(1, 2)).sum().backward()
    opt.step()
    assert all(p.grad_fn is None for p in net.parameters())


def test_never_imports_dynamo() -> None:
    code = (
        "import sys, torch\n"
        "from trainer.optim import EagerAdam\n"
        "net = torch.nn.Linear(2, 1)\n"
        "opt = EagerAdam(net.parameters())\n"
        "net(torch.ones(1, 2)).sum().backward()\n"
        "opt.step(); opt.zero_grad(); opt.load_state_dict(opt.state_dict())\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"
