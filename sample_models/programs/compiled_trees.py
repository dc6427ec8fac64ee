"""torch.compile(mode="reduce-overhead") as a serving loop meets it: the model sees a second
batch size (inductor's cudagraph trees record a second graph for it), and a helper compiled
the same way writes its input in place, a region torch will not put in a CUDA graph (it
skips it, saying why). Unmodified program."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(256, 512)
        self.fc2 = nn.Linear(512, 256)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@torch.compile(mode="reduce-overhead")
def bump(counts):
    counts.add_(1)  # a mutated input: cudagraph trees skip this function
    return counts * 2


def main():
    model = Net().cuda().eval()
    cmodel = torch.compile(model, mode="reduce-overhead")
    counts = torch.zeros(16, device="cuda")
    with torch.no_grad():
        for batch in (8, 8, 8, 8, 32, 32, 32, 32, 8, 8):
            y = cmodel(torch.randn(batch, 256, device="cuda"))
            bump(counts)
    torch.cuda.synchronize()
    print("out", tuple(y.shape), "counts", int(counts[0].item()))


if __name__ == "__main__":
    main()
