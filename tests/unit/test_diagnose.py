"""What a failed capture says: module path and user line."""

import torch
from torch import nn

from graphscope.capture.failure import describe_exception, find_culprit, forbidden, module_names


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin("not a tensor")  # the user's bug


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(Inner())

    def forward(self, x):
        return self.block(x)


def test_exception_names_module_and_user_line():
    model = Outer()
    try:
        model(torch.ones(1, 4))
    except Exception as exc:
        got = describe_exception(exc, model)
    assert got.startswith("TypeError: ")
    assert "in L.block.0.lin" in got
    assert f"{__file__}:15 (forward)" in got


def test_module_names_are_paths():
    names = module_names(Outer())
    assert sorted(names.values()) == ["L", "L.block", "L.block.0", "L.block.0.lin"]


def test_cpu_only_work_has_no_culprit():
    model = nn.Linear(4, 4)
    assert find_culprit(lambda: model(torch.ones(2, 4)).sum().item(), model) is None


def test_forbidden_ignores_cpu_ops():
    t = torch.ones(3)
    assert forbidden(torch.ops.aten._local_scalar_dense.default, (t,), {}) is None
    assert forbidden(torch.ops.aten.nonzero.default, (t,), {}) is None
