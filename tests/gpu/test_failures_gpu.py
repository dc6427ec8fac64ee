"""Capture failures say what to fix, in one line, and leave the process usable."""

import os

import pytest

from graphscope._errors import CaptureError
from graphscope.capture import run_capture
from graphscope.capture.config import CaptureConfig
from tests.conftest import SAMPLES

pytestmark = pytest.mark.gpu

BODY = """
import torch
from torch import nn

class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
{line}
        return self.lin(x)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x)

def graphscope_model():
    return Net(), (torch.randn(4, 16),)
"""

CASES = {
    "item": ("        if x.sum().item() > 1e9: x = x * 2",
             "aten::_local_scalar_dense reads a GPU value on the host"),
    "cpu_copy": ("        x = x + torch.ones(16).to(x.device)",
                 "copies a CPU tensor (not pinned) to the GPU"),
    "nonzero": ("        x = x + x.nonzero().sum()", "depends on the data"),
    "warmup": ("        x = self.lin('not a tensor')", "raised during warmup: TypeError"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_capture_failure_names_op_module_and_line(tmp_path, case):
    line, expect = CASES[case]
    path = tmp_path / f"{case}.py"
    path.write_text(BODY.format(line=line))
    cfg = CaptureConfig(model=str(path), replays=2, output=str(tmp_path / "out")).validate()
    with pytest.raises(CaptureError) as e:
        run_capture(cfg)
    msg = str(e.value)
    assert expect in msg, msg
    assert "L.inner" in msg and f"{path}:11 (forward)" in msg, msg
    assert "\n" not in msg
    assert not os.path.exists(tmp_path / "out")  # nothing half-written
    # the process is usable: the next capture works
    ok = CaptureConfig(model=os.path.join(SAMPLES, "mlp.py"), replays=2,
                       output=str(tmp_path / "ok")).validate()
    assert run_capture(ok).join.unjoined_records == 0
