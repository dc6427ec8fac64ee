"""The sample MLP under DistributedDataParallel: run with `graphscope capture --nproc 2`.

graphscope wraps the model in DDP (NCCL) when `settings["ddp"]` is true and it runs under
torchrun; the gradient all-reduce kernels are then captured in the step graph.
"""

from mlp import graphscope_model as _mlp  # a sibling: the model file's folder is on sys.path


def graphscope_model():
    spec = _mlp()
    spec["settings"] = {"ddp": True}
    return spec
