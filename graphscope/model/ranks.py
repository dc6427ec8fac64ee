"""Many GPUs: the rank of this process under torchrun, and per-rank bundles on disk.

Layout: a multi-rank bundle is a directory holding ``rank<r>/`` bundles, one per rank
(``graphscope capture`` under torchrun writes its rank's there). The cross-rank view is
``analysis/ranks.py``'s ``merge``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

from .._errors import BundleError
from .bundle import Bundle
from .bundle_files import rank_dirs
from .bundle_io import read_bundle

NVLINK_MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                        "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int


def rank_from_env(env: Optional[dict[str, str]] = None) -> Optional[RankInfo]:
    """The torchrun rank of this process, or None outside torchrun."""
    e = os.environ if env is None else env
    if "RANK" not in e or "WORLD_SIZE" not in e:
        return None
    return RankInfo(int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", e["RANK"])))


def rank_output(base: str, info: RankInfo) -> str:
    return os.path.join(base, f"rank{info.rank}")


def torchrun_argv(nproc: int, argv: list[str]) -> list[str]:
    """The command that re-runs ``graphscope <argv>`` under torchrun with ``nproc`` ranks
    (``--nproc`` removed so that the ranks do not recurse)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--nproc":
            skip = True
            continue
        if a.startswith("--nproc="):
            continue
        out.append(a)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "graphscope", *out]


def torchrun_env(base: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(NVLINK_MULTICAST_OFF)
    return env


def is_multirank(path: str) -> bool:
    return bool(rank_dirs(path)) and not os.path.exists(os.path.join(path, "manifest.json"))


def read_ranks(path: str) -> list[tuple[int, Bundle]]:
    ranks = rank_dirs(path)
    if not ranks:
        raise BundleError(f"{path}: no rank<r>/ bundles (not a multi-rank bundle)")
    for _, p in ranks:
        if not os.path.isdir(p):
            raise BundleError(f"{p}: not a directory (a rank's bundle is a directory)")
    expected = list(range(len(ranks)))
    got = [r for r, _ in ranks]
    if got != expected:
        raise BundleError(f"{path}: ranks {got} are not 0..{len(ranks) - 1}: a rank's capture "
                          "is missing")
    out = [(r, read_bundle(p)) for r, p in ranks]
    for r, b in out:  # each rank says which it is and how many there were
        info = b.manifest.get("rank") or {}
        if info.get("rank", r) != r:
            raise BundleError(f"{b.path}: its manifest says rank {info['rank']}, not {r}")
        world = info.get("world_size", len(out))
        if world != len(out):
            missing = ", ".join(f"rank{x}" for x in range(len(out), min(world, len(out) + 4)))
            missing += ", ..." if world > len(out) + 4 else ""
            raise BundleError(f"{path}: world_size is {world} but {len(out)} rank(s) are "
                              "present" + (f" ({missing} missing)" if missing else ""))
    return out

