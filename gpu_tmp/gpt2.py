import torch
from transformers import GPT2Config, GPT2LMHeadModel


def graphscope_model():
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000,
                                       n_positions=64, use_cache=False))
    return {"model": model, "args": (torch.randint(0, 1000, (4, 32)),)}
