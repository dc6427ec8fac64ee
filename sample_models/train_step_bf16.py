"""A whole training step for `graphscope capture` ("step": fn): bf16 autocast, two
micro-batches accumulated into .grad, AdamW(capturable=True), keyword inputs and a dict output.

graphscope warms the step up on a side stream and captures all of it as one graph: forward and
backward per micro-batch, the accumulation into .grad (owner module, op accumulate_grad) and the
optimizer (scope (optimizer), phase optimizer).
"""

import torch
import torch.nn.functional as F
from torch import nn

D, CLASSES = 256, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x):
        return x + self.ff(self.norm(x))  # x feeds two consumers: gradient accumulation


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x, *, mask):
        h = self.blocks(x) * mask
        return {"logits": self.head(h), "hidden": h}


def graphscope_model():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(2, 32, D)  # two micro-batches of 32
    y = torch.randint(0, CLASSES, (2, 32))
    mask = torch.ones(32, 1)
    state = {}

    def step(model, x, *, mask):
        if "opt" not in state:  # built once, on the GPU, during warm-up
            state["opt"] = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
            state["y"] = y.to(x.device)
        opt = state["opt"]
        opt.zero_grad(set_to_none=False)  # .grad exists: each micro-batch accumulates into it
        for i in range(x.shape[0]):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x[i], mask=mask)
                loss = F.cross_entropy(out["logits"].float(), state["y"][i])
            (loss / x.shape[0]).backward()
        opt.step()

    return {"model": model, "args": (x,), "kwargs": {"mask": mask}, "step": step}
