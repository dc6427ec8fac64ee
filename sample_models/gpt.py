"""A small GPT-style transformer: attention, LayerNorm, dropout, tied embeddings."""

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, p: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))


class MLP(nn.Module):
    def __init__(self, d: int, p: float) -> None:
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(self.act(self.fc(x))))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, p: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, p)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d, p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 512, d: int = 128, heads: int = 4, layers: int = 2,
                 ctx: int = 64, p: float = 0.1) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList(Block(d, heads, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied weights

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def graphscope_model():
    torch.manual_seed(0)
    model = GPT()
    idx = torch.randint(0, 512, (8, 64))
    targets = torch.randint(0, 512, (8, 64))
    on_device = {}  # moved once, in warm-up: copies from pageable CPU memory can't be captured

    def loss(logits: torch.Tensor) -> torch.Tensor:
        if logits.device not in on_device:
            on_device[logits.device] = targets.to(logits.device)
        t = on_device[logits.device]
        return nn.functional.cross_entropy(logits.flatten(0, 1), t.flatten())

    return {"model": model, "args": (idx,), "loss": loss}
