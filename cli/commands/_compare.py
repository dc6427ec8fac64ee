"""What `diff` and `check --baseline` both read beside a bundle, and say when two bundles look
unrelated."""

from __future__ import annotations

from typing import Any


def read_side(path: str, bundle: Any = None) -> Any:
    """The bundle at ``path`` (``bundle``: already read) and the files beside it a comparison
    uses: its kept diagnosis where current, eager baseline and counters."""
    from graphscope.analysis.gate import Side
    from graphscope.model.bundle_files import read_counters, read_diagnosis, read_eager
    from graphscope.model.bundle_io import read_bundle

    return Side(bundle if bundle is not None else read_bundle(path), path,
                read_diagnosis(path), read_eager(path), read_counters(path))


def unrelated(a: Any, b: Any, cmp: Any) -> list[str]:
    """:func:`unrelated_warnings` of bundles ``a`` and ``b`` by their comparison ``cmp``."""
    rows = cmp.modules_work.modules if cmp.modules_work is not None else ()
    return unrelated_warnings(a, b, {"modules": [{"only_in": r.only_in} for r in rows]})


def unrelated_warnings(a: Any, b: Any, d: dict[str, Any]) -> list[str]:
    """Warnings for bundles ``a`` and ``b`` (``d``: their ``diff_summary``) that come from
    different model files or share no module: their deltas compare nothing."""
    out = []
    ma, mb = (x.manifest.get("model") or {} for x in (a, b))
    if not isinstance(ma, dict) or not isinstance(mb, dict):
        ma, mb = {}, {}
    if ma.get("sha256") and mb.get("sha256") and ma["sha256"] != mb["sha256"]:
        out.append(f"the bundles come from different model files ({ma.get('path')} vs "
                   f"{mb.get('path')})" if ma.get("path") != mb.get("path") else
                   f"the bundles come from different versions of {ma.get('path')} (its "
                   "contents changed between the captures)")
    if not any(r["only_in"] is None for r in d["modules"]):
        out.append("the bundles share no module: they look like different models")
    na, nb = ([g.name for g in x.graphs] for x in (a, b))
    only_a, only_b = [g for g in na if g not in nb], [g for g in nb if g not in na]
    if only_a or only_b:
        out.append("the bundles hold different graphs, so totals compare different sets ("
                   + "; ".join(f"{len(xs)} only in {side}: {_names(xs)}"
                               for side, xs in (("A", only_a), ("B", only_b)) if xs) + ")")
    from graphscope.render.fmt import safe  # names and paths from the bundles: no escapes

    return [safe(w) for w in out]


def _names(xs: list[str], n: int = 3) -> str:
    return ", ".join(xs[:n]) + (f", … ({len(xs) - n} more)" if len(xs) > n else "")
