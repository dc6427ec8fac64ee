"""graphscope/annotate/tensors.py: the one walk through values for their tensors."""

from __future__ import annotations

import dataclasses

import torch

from graphscope.annotate.tensors import MAX_DEPTH, storage_key, tensors_in
from graphscope.capture.meter import tensor_bytes


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    extra: object = None


def test_tensors_in_finds_every_container_in_order():
    a, b, c, d = (torch.zeros(i + 1) for i in range(4))
    value = (a, [b, {"k": c, "n": None}], Out(d, extra=(1, "x")), 3.0, Out)
    assert [t.numel() for t in tensors_in(value)] == [1, 2, 3, 4]
    assert tensors_in(None) == [] and tensors_in(a) == [a]


def test_tensors_in_stops_at_max_depth():
    t = torch.ones(1)
    deep: object = t
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    assert tensors_in(deep) == []
    shallow: object = t
    for _ in range(MAX_DEPTH):
        shallow = [shallow]
    assert tensors_in(shallow) == [t]


def test_storage_key_is_shared_by_views():
    t = torch.arange(8.0)
    assert storage_key(t) == storage_key(t[2:]) == storage_key(t.view(2, 4)) != 0
    assert storage_key(torch.arange(8.0)) != storage_key(t)


def test_tensor_bytes_counts_cuda_tensors_only():
    assert tensor_bytes((torch.ones(4), {"x": Out(torch.ones(2))})) == 0  # CPU only here
