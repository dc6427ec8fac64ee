"""A small ResNet-like CNN with BatchNorm."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(x + self.bn2(self.conv2(y)))


class SmallResNet(nn.Module):
    def __init__(self, c: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                                  nn.ReLU())
        self.layer1 = nn.Sequential(Block(c), Block(c))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layer1(self.stem(x))), 1))


def graphscope_model():
    torch.manual_seed(0)
    model = SmallResNet()
    x = torch.randn(16, 3, 32, 32)
    labels = torch.randint(0, 10, (16,))
    on_device = {}  # moved once, in warm-up: copies from pageable CPU memory can't be captured

    def loss(out: torch.Tensor) -> torch.Tensor:
        if out.device not in on_device:
            on_device[out.device] = labels.to(out.device)
        t = on_device[out.device]
        return nn.functional.cross_entropy(out, t)

    return {"model": model, "args": (x,), "loss": loss}
