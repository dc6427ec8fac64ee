"""Every capture hazard graphscope lint knows, one per module (each with its line)."""

import torch
from torch import nn


class Sync(nn.Module):
    def forward(self, x):
        scale = x.abs().max().item()  # host sync
        return x / scale


class Dynamic(nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x > 0)  # data-dependent shape
        return x + idx.shape[0]


class Masked(nn.Module):
    def forward(self, x):
        return x[x > 0].sum() + x  # boolean-mask indexing


class Branch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # tensor-valued control flow
            return x * 2
        return x


class Printer(nn.Module):
    def forward(self, x):
        print(f"x = {x}")  # prints a tensor
        return x


class Factory(nn.Module):
    def forward(self, x):
        return x + torch.ones(x.shape[-1])  # CPU tensor created in forward


class ToHost(nn.Module):
    def forward(self, x):
        _ = x.cpu()
        torch.cuda.synchronize()
        return x


class Bad(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.sync, self.dyn, self.mask = Sync(), Dynamic(), Masked()
        self.branch, self.printer = Branch(), Printer()
        self.factory, self.host = Factory(), ToHost()
        self.lin.register_forward_hook(lambda *a: None)
        self.register_buffer("scale", torch.ones(8, requires_grad=True))

    def forward(self, x, repeats):
        x = self.lin(x)
        for m in (self.sync, self.dyn, self.mask, self.branch, self.printer, self.factory,
                  self.host):
            x = m(x)
        return x


def graphscope_model():
    torch.manual_seed(0)
    return Bad(), (torch.randn(4, 8), 3)
