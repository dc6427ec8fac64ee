"""A 3-layer MLP: the default sample model of `graphscope capture`."""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 256, d_hidden: int = 512, d_out: int = 64) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.head = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.fc2(self.act(self.fc1(x)))))


def graphscope_model():
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(64, 256)
    target = torch.randn(64, 64)
    on_device = {}  # moved once, in warm-up: copies from pageable CPU memory can't be captured

    def loss(out: torch.Tensor) -> torch.Tensor:
        if out.device not in on_device:
            on_device[out.device] = target.to(out.device)
        t = on_device[out.device]
        return nn.functional.mse_loss(out, t)

    return {"model": model, "args": (x,), "loss": loss}
