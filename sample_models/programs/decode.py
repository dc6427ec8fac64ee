"""A serving-style decode loop: a static KV cache, one CUDA graph per batch bucket (1 and 8),
each replayed for every generated token. Unmodified program."""

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, HEADS, LAYERS, MAX_LEN = 1024, 256, 4, 2, 64


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)

    def forward(self, x, k_cache, v_cache, pos):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 1, 3, HEADS, D // HEADS).unbind(2)
        k_cache.index_copy_(1, pos, k)
        v_cache.index_copy_(1, pos, v)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), k_cache.transpose(1, 2),
                                             v_cache.transpose(1, 2))
        return self.out(att.transpose(1, 2).reshape(b, 1, D))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = Attn()
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x, k_cache, v_cache, pos):
        x = x + self.attn(self.ln1(x), k_cache, v_cache, pos)
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids, caches, pos):
        x = self.emb(ids)
        for blk, (k, v) in zip(self.blocks, caches):
            x = blk(x, k, v, pos)
        return self.head(self.ln(x))


@torch.inference_mode()
def main():
    model = Decoder().cuda().eval()
    graphs = {}
    for bucket in (1, 8):
        ids = torch.zeros(bucket, 1, dtype=torch.long, device="cuda")
        pos = torch.zeros(1, dtype=torch.long, device="cuda")
        caches = [(torch.zeros(bucket, MAX_LEN, HEADS, D // HEADS, device="cuda"),
                   torch.zeros(bucket, MAX_LEN, HEADS, D // HEADS, device="cuda"))
                  for _ in range(LAYERS)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                model(ids, caches, pos)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            logits = model(ids, caches, pos)
        graphs[bucket] = (g, ids, pos, logits)
    for g, ids, pos, logits in graphs.values():
        for t in range(40):
            pos.fill_(t)
            g.replay()
            ids.copy_(logits.argmax(-1))
    torch.cuda.synchronize()
    print("decoded", {b: graphs[b][1].flatten().tolist()[:4] for b in graphs})


if __name__ == "__main__":
    main()
