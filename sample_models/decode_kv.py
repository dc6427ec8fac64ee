"""A decode step with a static KV cache, for `graphscope capture --mode forward`.

Each bucket is one batch size, captured as its own inference graph (as serving engines do):
``graphscope capture sample_models/decode_kv.py --mode forward``. The cache and the position
are module buffers, so every replay reads and writes the same memory.
"""

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, HEADS, LAYERS, MAX_LEN, MAX_BATCH = 1024, 256, 4, 2, 64, 8


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)
        shape = (MAX_BATCH, MAX_LEN, HEADS, D // HEADS)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x, pos):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 1, 3, HEADS, D // HEADS).unbind(2)
        kc, vc = self.k_cache[:b], self.v_cache[:b]
        kc.index_copy_(1, pos, k)
        vc.index_copy_(1, pos, v)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2),
                                             vc.transpose(1, 2))
        return self.out(att.transpose(1, 2).reshape(b, 1, D))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = Attn()
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x, pos):
        x = x + self.attn(self.ln1(x), pos)
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids, *, pos):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, pos)
        return self.head(self.ln(x))


def graphscope_model():
    torch.manual_seed(0)
    pos = torch.zeros(1, dtype=torch.long)
    return {
        "model": Decoder(),
        # one input set per batch bucket; the keyword input is shared by every bucket
        "buckets": [(torch.zeros(b, 1, dtype=torch.long),) for b in (1, 4, 8)],
        "kwargs": {"pos": pos},
    }
