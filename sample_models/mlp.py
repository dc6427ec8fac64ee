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

    def loss(out: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(out, target.to(out.device))

    return {"model": model, "args": (x,), "loss": loss}
