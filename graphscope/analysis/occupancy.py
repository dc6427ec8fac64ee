"""What share of the GPU a kernel occupies: the device (SM count and per-SM limits of its
compute capability) and the occupancy rules that turn a launch configuration (grid, block,
shared memory, registers per thread) into resident blocks per SM.

Where the device comes from
    The manifest's ``versions.gpu_properties`` (``sm_count``, ``major``, ``minor``), where a
    capture recorded them; else the GPU's name (``versions.gpu``) looked up in
    :data:`KNOWN_GPUS`; else an H100-class device (132 SMs, compute capability 9.0), said so
    in ``Device.source``.

Occupancy (CUDA's occupancy calculator rules, per SM)
    warps per block      ceil(threads / 32)
    by warps             max warps per SM // warps per block
    by registers         registers per warp = ceil(regs per thread * 32 / 256) * 256;
                         warps that fit = registers per SM // registers per warp, rounded
                         down to whole blocks
    by shared memory     (smem + 1 KiB reserved per block, rounded up to 128 B): shared
                         memory per SM // that
    by blocks            the compute capability's resident-block limit
    resident blocks      the least of these (at least 1: a kernel that launched fits once)

Registers per thread: a kernel node's ``registers`` where the bundle records it (the
capture asks the driver for each kernel function's ``CU_FUNC_ATTRIBUTE_NUM_REGS``; bundles
recorded before that have none). Without them the *worst case* is assumed: 255 registers
per thread, or as many as still let one block of that size fit on an SM (the compiler caps
registers so that the block can launch). The best case (32 per thread: no register limit
below the warp limit at full occupancy) bounds the other side.

Share of the device
    waves = ceil(blocks / (SMs * resident blocks)); the kernel fills, on average over its
    waves, ``blocks / (waves * SMs * resident blocks)`` of the device's block slots: a
    kernel of 1.1 full waves leaves most of the device free in its second wave, which side
    by side kernels can use.

    A compute-dense kernel (at least COMPUTE_DENSE_REGS registers per thread, as the bundle
    records them: GEMMs, attention, implicit-GEMM convolutions, whose compilers trade
    occupancy for registers; the worst case assumed for a kernel without them is no evidence)
    takes at least the share of the SMs its blocks spread over (the block scheduler puts one
    block on each SM before a second on any): one of its blocks keeps an SM's math pipes busy,
    so the blocks of another kernel placed beside it slow it down rather than filling free
    slots. Measured on the H200 (2026-12-03, ``bench/whatif_accuracy.py``): GPT-NeoX's
    parallel attention and MLP GEMMs (96-288 blocks of 126-128 registers per thread, a fifth
    to a half of the block slots) ran 20-50% longer beside each other over four streams; by
    slots alone the model saw room for both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

if TYPE_CHECKING:
    from .dag import Dag

WORST_REGS = 255  # the most registers a thread can have (every compute capability since 3.5)
BEST_REGS = 32
# registers per thread from which a kernel is taken as compute-dense (module docstring): its
# share is at least the SMs its blocks spread over
COMPUTE_DENSE_REGS = 96
REG_UNIT = 256  # registers are allocated per warp in units of 256
SMEM_UNIT = 128
SMEM_RESERVED = 1024  # per block, compute capability 8.0 and later (0 before)


@dataclass(frozen=True)
class Arch:
    """Per-SM limits of one compute capability."""

    max_threads: int
    max_warps: int
    max_blocks: int
    registers: int
    smem_bytes: int  # shared memory per SM usable by blocks
    smem_reserved: int  # per block


ARCHS: dict[tuple[int, int], Arch] = {
    (7, 0): Arch(2048, 64, 32, 65536, 96 * 1024, 0),
    (7, 5): Arch(1024, 32, 16, 65536, 64 * 1024, 0),
    (8, 0): Arch(2048, 64, 32, 65536, 164 * 1024, SMEM_RESERVED),
    (8, 6): Arch(1536, 48, 16, 65536, 100 * 1024, SMEM_RESERVED),
    (8, 7): Arch(2048, 64, 32, 65536, 164 * 1024, SMEM_RESERVED),
    (8, 9): Arch(1536, 48, 24, 65536, 100 * 1024, SMEM_RESERVED),
    (9, 0): Arch(2048, 64, 32, 65536, 228 * 1024, SMEM_RESERVED),
    (10, 0): Arch(2048, 64, 32, 65536, 228 * 1024, SMEM_RESERVED),
    (12, 0): Arch(1536, 48, 32, 65536, 100 * 1024, SMEM_RESERVED),
}

# (name pattern, compute capability, SMs): the first match wins, so specific names first
KNOWN_GPUS: tuple[tuple[str, tuple[int, int], int], ...] = (
    (r"H100.*PCIe", (9, 0), 114),
    (r"H100 NVL", (9, 0), 132),
    (r"GH200|H200|H100|H800", (9, 0), 132),
    (r"B200|GB200", (10, 0), 148),
    (r"A100|A800", (8, 0), 108),
    (r"A30\b", (8, 0), 56),
    (r"A10G", (8, 6), 80),
    (r"A10\b", (8, 6), 72),
    (r"L40", (8, 9), 142),
    (r"L4\b", (8, 9), 58),
    (r"RTX 4090", (8, 9), 128),
    (r"RTX 3090", (8, 6), 82),
    (r"V100", (7, 0), 80),
    (r"T4\b", (7, 5), 40),
)
DEFAULT_GPU = ((9, 0), 132)


@dataclass(frozen=True)
class Device:
    """The GPU the bundle was recorded on, as the occupancy model sees it."""

    name: str
    sm_count: int
    compute_capability: tuple[int, int]
    source: str  # "properties" | "name_table" | "assumed"
    copy_engines: int = 2  # concurrent copies before they queue (memcpy nodes)

    @property
    def arch(self) -> Arch:
        cc = self.compute_capability
        if cc in ARCHS:
            return ARCHS[cc]
        older = [k for k in ARCHS if k <= cc]
        return ARCHS[max(older)] if older else ARCHS[(7, 0)]


def device_of(manifest: Mapping[str, Any]) -> Device:
    """The device of a bundle's manifest (module docstring: where it comes from)."""
    versions = manifest.get("versions") if isinstance(manifest, Mapping) else None
    versions = versions if isinstance(versions, Mapping) else {}
    name = str(versions.get("gpu") or "")
    props = versions.get("gpu_properties")
    if isinstance(props, Mapping):
        sms, major, minor = (props.get(k) for k in ("sm_count", "major", "minor"))
        if all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
               for x in (sms, major, minor)) and sms:
            assert isinstance(sms, int) and isinstance(major, int) and isinstance(minor, int)
            return Device(name or "?", sms, (major, minor), "properties")
    for pattern, cc, sms in KNOWN_GPUS:
        if name and re.search(pattern, name):
            return Device(name, sms, cc, "name_table")
    cc, sms = DEFAULT_GPU
    return Device(name or "?", sms, cc, "assumed")


def worst_registers(threads: int, arch: Arch) -> int:
    """The most registers per thread a block of ``threads`` can have and still fit one block
    on an SM (at most :data:`WORST_REGS`)."""
    warps = max(1, math.ceil(threads / 32))
    per_warp = arch.registers // warps // REG_UNIT * REG_UNIT  # registers one warp may hold
    return max(1, min(WORST_REGS, per_warp // 32))


def resident_blocks(threads: int, smem: int, regs: Optional[int], arch: Arch) -> int:
    """Blocks of one kernel resident per SM (module docstring); ``regs`` None: the worst
    case for this block size."""
    if threads <= 0:
        return arch.max_blocks
    warps = math.ceil(threads / 32)
    r = worst_registers(threads, arch) if regs is None else max(1, regs)
    per_warp = math.ceil(r * 32 / REG_UNIT) * REG_UNIT
    by_regs = (arch.registers // per_warp) // warps
    by_warps = arch.max_warps // warps
    need = math.ceil((max(smem, 0) + arch.smem_reserved) / SMEM_UNIT) * SMEM_UNIT
    by_smem = arch.smem_bytes // need if need else arch.max_blocks
    return max(1, min(arch.max_blocks, by_warps, by_regs, by_smem))


def device_share(grid: tuple[int, ...], block: tuple[int, ...], smem: int,
                 regs: Optional[int], device: Device) -> float:
    """The average share of the device's block slots a kernel fills over its waves (module
    docstring); 0 for a node without a launch configuration."""
    blocks = math.prod(max(0, x) for x in grid) if grid else 0
    threads = math.prod(max(0, x) for x in block) if block else 0
    if blocks <= 0 or threads <= 0:
        return 0.0
    slots = device.sm_count * resident_blocks(threads, smem, regs, device.arch)
    waves = math.ceil(blocks / slots)
    share = blocks / (waves * slots)
    if regs is not None and regs >= COMPUTE_DENSE_REGS:  # recorded (not the worst case)
        sms = device.sm_count
        share = max(share, blocks / (math.ceil(blocks / sms) * sms))
    return share


class Resources:
    """Per node: its share of the SMs (worst and best register case) and of the copy
    engines. Made for the nodes asked (:meth:`ensure`): a node that runs beside no other
    never needs its share, and reading 100,000 nodes' launch configurations costs 0.1 s."""

    def __init__(self, sm_worst: np.ndarray, sm_best: np.ndarray, ce: np.ndarray,
                 dag: Optional[Dag] = None, device: Optional[Device] = None) -> None:
        self.sm_worst, self.sm_best, self.ce = sm_worst, sm_best, ce
        self._dag, self._device = dag, device
        self._known = np.full(len(sm_worst), dag is None)
        self._recorded = self._all_recorded = False
        if dag is not None:
            regs = list(map(attrgetter("registers"), compress(dag.nodes, dag.is_kernel)))
            have = len(regs) - regs.count(None)
            self._recorded = have > 0  # some kernels: read each node's
            self._all_recorded = have == len(regs)

    @property
    def registers_assumed(self) -> bool:
        """Whether the shares assume registers per thread (for a kernel the bundle has
        none for)."""
        if self._dag is not None:
            return not self._all_recorded and "kernel" in self._dag.types
        return not np.array_equal(self.sm_worst, self.sm_best)

    def ensure(self, mask: np.ndarray) -> None:
        """Fill in the shares of the nodes ``mask`` selects."""
        dag, device = self._dag, self._device
        if dag is None or device is None:
            return
        need = np.flatnonzero(mask & ~self._known)
        if not len(need):
            return
        self._known[need] = True
        copies = need[dag.is_memcpy[need]]
        self.ce[copies] = 1.0 / max(1, device.copy_engines)
        kern = need[np.asarray(dag.is_kernel)[need]]
        if len(kern):
            # attrgetter in C, and one computation per distinct launch configuration (each
            # key hashed once: a launch configuration is a tuple of tuples, whose hash is
            # not kept)
            keys = map(_LAUNCH_REGS if self._recorded else _LAUNCH,
                       map(dag.nodes.__getitem__, kern.tolist()))
            code: dict[tuple[Any, ...], int] = {}
            first = code.setdefault
            idx = np.array([first(k, len(code)) for k in keys], np.int64)
            pairs = np.array([_shares(_checked(k), device) for k in code],
                             float).reshape(-1, 2)
            self.sm_worst[kern], self.sm_best[kern] = pairs[idx, 0], pairs[idx, 1]


def resources(dag: Dag, device: Device, lazy: bool = False) -> Resources:
    """The nodes' shares of the device (module docstring): at a kernel's recorded registers
    per thread (a node's ``registers``, where the bundle has it), else at the worst case and
    the best case both. ``lazy``: none made yet (:meth:`Resources.ensure` makes them)."""
    n = dag.n
    out = Resources(np.zeros(n), np.zeros(n), np.zeros(n), dag, device)
    if not lazy:
        out.ensure(np.ones(n, bool))
    return out


_LAUNCH = attrgetter("grid", "block", "smem")


def _shares(k: tuple[Any, ...], device: Device) -> tuple[float, float]:
    """(worst, best) share of a launch configuration (grid, block, smem[, registers])."""
    regs = k[3] if len(k) > 3 else None
    return (device_share(k[0], k[1], k[2], regs, device),
            device_share(k[0], k[1], k[2], BEST_REGS if regs is None else regs, device))


_LAUNCH_REGS = attrgetter("grid", "block", "smem", "registers")


def _checked(k: tuple[Any, ...]) -> tuple[Any, ...]:
    """A launch configuration with its registers per thread None unless a positive int."""
    if len(k) < 4:
        return k
    regs = k[3]
    return k if isinstance(regs, int) and not isinstance(regs, bool) and regs > 0 else (
        *k[:3], None)
