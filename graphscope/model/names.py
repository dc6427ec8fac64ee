"""Kernel names as reports show them: ``void at::native::foo<4, F>(...)`` reads ``foo``, and two
different kernels never share a shown name (their differing template arguments are added)."""

from __future__ import annotations

import functools
import re

# Names that say little alone: qualify them with what their template arguments instantiate.
_GENERIC = {"Kernel", "Kernel2", "kernel", "vectorized_elementwise_kernel", "elementwise_kernel",
            "unrolled_elementwise_kernel", "reduce_kernel", "device_kernel"}
_IDENT = re.compile(r"[A-Za-z_]\w*")
_QUALIFYING = re.compile(r"Functor|functor|Impl|_kernel_cuda|_sgemm|_gemm")
_NOT_QUALIFYING = {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "func_wrapper_t", "ReduceOp",
                   "TensorIteratorBase", "OffsetCalculator"}
# namespaces that say nothing of a generic kernel (``internal::gemvx::kernel``: ``gemvx``)
_PLAIN_SCOPES = {"at", "native", "std", "internal", "detail", "c10", "cuda", "anonymous"}


def _strip_nested(s: str) -> str:
    """``s`` without its ``<...>`` and ``(...)`` groups, however deep: one linear pass."""
    out = []
    depth = 0
    for ch in s:
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


MAX_NAME = 4096  # longer kernel names are cut before they are shortened


@functools.lru_cache(maxsize=65536)
def short_kernel_name(name: str) -> str:
    """``void at::native::foo<4, F>(int, F)`` -> ``foo``; generic names keep a qualifier
    (``vectorized_elementwise_kernel<GeluCUDAKernelImpl>``); plain C names pass through."""
    s = name[:MAX_NAME].strip()
    if s.startswith("void "):
        s = s[5:]
    path = _strip_nested(s).split(" ")[-1].split("::")
    base = path[-1].strip()
    if not base:
        return name[:60]
    if base in _GENERIC and "<" in s:
        for ident in _IDENT.findall(s[s.index("<"):MAX_NAME]):
            if _QUALIFYING.search(ident) and ident not in _NOT_QUALIFYING:
                return f"{base}<{ident}>"
    if base in _GENERIC and len(path) >= 3:  # nothing in its arguments says what it is: the
        # scope it is declared in, below a library's namespace, may (a library's own top
        # namespace, cutlass::Kernel2, is left to the arguments' disambiguation)
        scope = path[-2].strip()
        if scope and scope not in _PLAIN_SCOPES:
            return f"{scope}::{base}"
    return base


def _group_args(s: str, opener: str) -> list[str]:
    """The top-level arguments of ``s``'s first ``<...>`` (or ``(...)``) group, each without
    its namespaces: ``f<a::B<1>, float>`` -> ``['B<1>', 'float']``."""
    s = s.replace("(anonymous namespace)::", "")
    i = s.find(opener)
    if i < 0:
        return []
    args: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s[i + 1:MAX_NAME]:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    args.append("".join(cur).strip())
    out = []
    for a in args:
        head, sep, rest = a.partition("<")
        out.append(head.rsplit("::", 1)[-1] + sep + rest)
    return [a for a in out if a]


MAX_SHOWN_NAME = 160  # a disambiguated kernel name keeps at most this many characters


_NAMESPACE = re.compile(r"\b\w+::")


def _with_args(short: str, args: list[str]) -> str:
    kept = [a for i, a in enumerate(args) if a != "…" or i == 0 or args[i - 1] != "…"]
    shown = ", ".join(_NAMESPACE.sub("", a) for a in kept)
    name = f"{short[:-1]}, {shown}>" if short.endswith(">") else f"{short}<{shown}>"
    if len(name) > MAX_SHOWN_NAME:
        name = name[:MAX_SHOWN_NAME - 1] + "…"
    return name


def _differing(args: list[str], every: list[list[str]]) -> list[str]:
    """The arguments of ``args`` not shared by every member (by position where all have as
    many)."""
    if all(len(a) == len(args) for a in every):
        return [x if any(o[i] != x for o in every) else "…" for i, x in enumerate(args)]
    common = set.intersection(*(set(a) for a in every))
    return [x for x in args if x not in common]


def unique_short_names(full_names: list[str]) -> dict[str, str]:
    """Short names for ``full_names`` that never put two different kernels under one name:
    where several kernels shorten alike, each keeps the template arguments (else the
    parameters) that tell it apart, and a ``#k`` suffix where even those are the same."""
    groups: dict[str, list[str]] = {}
    for full in dict.fromkeys(full_names):
        groups.setdefault(short_kernel_name(full), []).append(full)
    out: dict[str, str] = {}
    for short, fulls in groups.items():
        if len(fulls) == 1:
            out[fulls[0]] = short
            continue
        names: dict[str, str] = {}
        for opener in ("<", "("):
            argsets = {f: _group_args(f[5:] if f.startswith("void ") else f, opener)
                       for f in fulls}
            names = {f: _with_args(short, args) for f, args in argsets.items()}
            if len(set(names.values())) < len(fulls) or max(map(len, names.values())) > 100:
                # too long to read: only the arguments that differ
                names = {f: _with_args(short, _differing(args, list(argsets.values())))
                         for f, args in argsets.items()}
            if len(set(names.values())) == len(fulls):
                break
        else:  # alike in all they say: numbered
            names = {f: _with_args(short, _group_args(f, "<")) if "<" in f else short
                     for f in fulls}
        seen: dict[str, int] = {}
        for f in sorted(fulls):
            name = names.get(f) or short
            k = seen[name] = seen.get(name, 0) + 1
            out[f] = name if list(names.values()).count(name) == 1 else f"{name} #{k}"
    return out
