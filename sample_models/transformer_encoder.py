"""A 12-layer TransformerEncoder training step (d=512, 8 heads, 8 x 128 tokens): the workload of
the timeline benchmark (bench/bench_timeline.py)."""

import torch
from torch import nn


def graphscope_model():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, dropout=0.0,
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)
    x = torch.randn(8, 128, 512)
    return {"model": model, "args": (x,)}
