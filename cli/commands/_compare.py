"""What `diff` and `check --baseline` both say when two bundles look unrelated."""

from __future__ import annotations

from typing import Any


def unrelated_warnings(a: Any, b: Any, d: dict[str, Any]) -> list[str]:
    """Warnings for bundles ``a`` and ``b`` (``d``: their ``diff_summary``) that come from
    different model files or share no module: their deltas compare nothing."""
    out = []
    ma, mb = (x.manifest.get("model") or {} for x in (a, b))
    if not isinstance(ma, dict) or not isinstance(mb, dict):
        ma, mb = {}, {}
    if ma.get("sha256") and mb.get("sha256") and ma["sha256"] != mb["sha256"]:
        out.append(f"the bundles come from different model files ({ma.get('path')} vs "
                   f"{mb.get('path')})")
    if not any(r["only_in"] is None for r in d["modules"]):
        out.append("the bundles share no module: they look like different models")
    return out
