"""Partial-network capture, after PyTorch's CUDA-graph docs: make_graphed_callables on two of
three modules, trained in an ordinary eager loop. Unmodified program."""

import torch

N, D_in, H, D_out = 640, 4096, 2048, 1024
module1 = torch.nn.Linear(D_in, H).cuda()
module2 = torch.nn.Linear(H, D_out).cuda()
module3 = torch.nn.Linear(H, D_out).cuda()
loss_fn = torch.nn.MSELoss()
optimizer = torch.optim.SGD(
    list(module1.parameters()) + list(module2.parameters()) + list(module3.parameters()),
    lr=0.1)

x = torch.randn(N, D_in, device="cuda")
h = torch.randn(N, H, device="cuda", requires_grad=True)
module1 = torch.cuda.make_graphed_callables(module1, (x,))
module2 = torch.cuda.make_graphed_callables(module2, (h,))
module3 = torch.cuda.make_graphed_callables(module3, (h,))

real_inputs = [torch.rand_like(x) for _ in range(10)]
real_targets = [torch.randn(N, D_out, device="cuda") for _ in range(10)]
for step in range(30):
    data, target = real_inputs[step % 10], real_targets[step % 10]
    optimizer.zero_grad(set_to_none=True)
    tmp = module1(data)  # forward ops run as a graph
    if tmp.sum().item() > 0:
        tmp = module2(tmp)
    else:
        tmp = module3(tmp)
    loss = loss_fn(tmp, target)
    loss.backward()  # backward ops run as graphs
    optimizer.step()
print(f"loss {loss.item():.4f}")
