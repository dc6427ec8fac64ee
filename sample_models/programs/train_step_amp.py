"""A whole training step captured by the program itself: zero_grad, bf16 autocast forward,
cross-entropy, backward and AdamW(capturable=True).step() in one CUDA graph. Unmodified."""

import torch
from torch import nn

model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                      nn.Linear(512, 10)).cuda()
criterion = nn.CrossEntropyLoss()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
x = torch.randn(128, 256, device="cuda")
y = torch.randint(0, 10, (128,), device="cuda")


def step():
    opt.zero_grad(set_to_none=False)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = criterion(model(x), y)
    loss.backward()
    opt.step()
    return loss


s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_loss = step()
for _ in range(50):
    x.copy_(torch.randn_like(x))
    g.replay()
torch.cuda.synchronize()
print(f"loss {static_loss.item():.4f}")
