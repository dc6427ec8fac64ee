"""torch.compile(mode="reduce-overhead"): inductor's cudagraph trees capture the compiled
model's graphs. Unmodified program."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(512, 1024)
        self.norm = nn.LayerNorm(1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.head = nn.Linear(1024, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.norm(x))
        x = torch.relu(self.fc2(x))
        return self.head(x)


def main():
    model = Net().cuda().eval()
    cmodel = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(64, 512, device="cuda")
    with torch.no_grad():
        for _ in range(30):
            y = cmodel(x)
    torch.cuda.synchronize()
    print("out", tuple(y.shape))


if __name__ == "__main__":
    main()
