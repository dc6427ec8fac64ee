"""Model-file workloads on the CPU: input sets (buckets), keyword inputs, the user's step,
and the default loss on dict / dataclass / Hugging Face-style outputs."""

import dataclasses
import os
from collections import OrderedDict

import pytest
import torch

from graphscope._errors import CaptureError, ModelFileError
from graphscope.capture import default_loss
from graphscope.capture.config import mode_names
from graphscope.capture.forward import bucket_name
from graphscope.capture.loader import load_model_file
from tests.conftest import SAMPLES


def _write(tmp_path, body):
    p = tmp_path / "m.py"
    p.write_text("import torch\nfrom torch import nn\n" + body)
    return str(p)


def test_buckets_and_shared_kwargs_from_the_sample():
    spec = load_model_file(os.path.join(SAMPLES, "decode_kv.py"))
    assert [a[0].shape[0] for a, _ in spec.buckets] == [1, 4, 8]
    assert all(set(kw) == {"pos"} for _, kw in spec.buckets)
    assert spec.args is spec.buckets[0][0] and spec.kwargs == spec.buckets[0][1]
    assert bucket_name(1, spec.buckets[1][0], spec.buckets[1][1], 3) == "bucket1 [4,1] [1]"
    assert bucket_name(0, spec.args, spec.kwargs, 1) == "forward"


def test_step_and_kwargs_from_the_sample():
    spec = load_model_file(os.path.join(SAMPLES, "train_step_bf16.py"))
    assert callable(spec.step) and set(spec.kwargs) == {"mask"}
    assert spec.buckets == ()


def test_bucket_entries_may_be_dicts_and_single_tensors(tmp_path):
    path = _write(tmp_path, "def graphscope_model():\n"
                  "    return {'model': nn.Linear(2, 2), 'buckets': [torch.ones(1, 2),"
                  " {'args': (torch.ones(3, 2),), 'kwargs': {}}, {'kwargs': {'input': "
                  "torch.ones(5, 2)}}]}\n")
    spec = load_model_file(path)
    assert [len(a) for a, _ in spec.buckets] == [1, 1, 0]
    assert spec.buckets[2][1]["input"].shape == (5, 2)


@pytest.mark.parametrize("body,msg", [
    ("{'model': nn.Linear(2, 2), 'args': (torch.ones(1, 2),), 'buckets': []}",
     "give 'args' or 'buckets', not both"),
    ("{'model': nn.Linear(2, 2), 'buckets': []}", "buckets must be a non-empty list"),
    ("{'model': nn.Linear(2, 2), 'args': (), 'step': 3}", "step is not callable"),
    ("{'model': nn.Linear(2, 2), 'args': (), 'kwargs': [1]}", "kwargs must be a dict"),
    ("{'model': nn.Linear(2, 2), 'args': (), 'kwargs': {1: 2}}", "kwargs must be a dict of str"),
    ("{'model': nn.Linear(2, 2), 'buckets': [{'args': (), 'kwargs': 5}]}", "buckets[0]"),
    ("{'model': nn.Linear(2, 2), 'arg': ()}", "unknown key(s): arg"),
    ("{'model': nn.Linear(2, 2)}", "'args' (or 'buckets')"),
])
def test_bad_model_files_say_what_to_fix(tmp_path, body, msg):
    path = _write(tmp_path, f"def graphscope_model():\n    return {body}\n")
    with pytest.raises(ModelFileError) as e:
        load_model_file(path)
    assert msg in str(e.value) and path in str(e.value)


def test_modes_are_registered():
    assert {"step", "callables", "forward"} <= set(mode_names())


def _leaf(*shape):
    return torch.ones(*shape, requires_grad=True)


def test_default_loss_prefers_the_outputs_loss():
    a, loss = _leaf(2, 3), (_leaf(1) * 3).sum()
    out = OrderedDict(loss=loss, logits=a * 2)  # Hugging Face ModelOutput is an OrderedDict
    assert default_loss(out) is loss


def test_default_loss_sums_every_float_output_that_requires_grad():
    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor
        hidden: tuple
        ids: torch.Tensor

    a, b = _leaf(2, 2), _leaf(3)
    out = Out(logits=a * 1, hidden=({"h": b * 2},), ids=torch.zeros(2, dtype=torch.long))
    got = default_loss(out)
    assert float(got.detach()) == pytest.approx(4 + 6)
    got.backward()
    assert a.grad is not None and b.grad is not None


def test_default_loss_without_a_float_output_says_so():
    with pytest.raises(CaptureError, match="no floating-point tensor"):
        default_loss({"ids": torch.zeros(2, dtype=torch.long)})
