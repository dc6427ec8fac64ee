#!/usr/bin/env bash
# Regenerates the terminal pictures of README.md and docs/cli.md from the recorded bundles in
# tests/data:
#  - every fenced block that follows a comment `<!-- picture: COMMAND -->` (or
#    `<!-- picture lines=N: COMMAND -->`: its first N lines, then "..."; the comment may run
#    over several lines) becomes "$ COMMAND" (wrapped with a backslash past 96 characters) and
#    what COMMAND prints, run from the checkout's root with the checkout's .venv/bin first on
#    PATH, at 100 columns, trailing blanks stripped;
#  - docs/screenshots/readme_report_html.png: `graphscope report --html` of tests/data/demo/gpt_step
#    drawn by headless Chromium (skipped, saying so, where Chromium is not installed).
# Usage: docs/make_readme_pictures.sh           rewrite the pictures and the screenshot
#        docs/make_readme_pictures.sh --check   exit 1 if a block differs from what its command
#                                              prints now (nothing written)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/graphscope ]; then
  echo "no .venv/bin/graphscope: run 'make install' first" >&2
  exit 2
fi
export PATH="$PWD/.venv/bin:$PATH" COLUMNS=100 TERM=dumb NO_COLOR=1

.venv/bin/python - "$@" <<'EOF'
import re
import subprocess
import sys
import textwrap

check = sys.argv[1:] == ["--check"]
MARK = re.compile(r"<!-- picture(?: lines=(\d+))?: (.+?) -->", re.S)


def shown_command(cmd):
    """``$ cmd``, wrapped at word boundaries with a shell continuation past 96 characters."""
    parts = textwrap.wrap(cmd, 94, break_long_words=False, break_on_hyphens=False)
    return [("$ " if k == 0 else "    ") + p + (" \\" if k < len(parts) - 1 else "")
            for k, p in enumerate(parts)]


def pictures(path, stale):
    """``path``'s text with every picture block made again; stale blocks named in ``stale``."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        i = picture(path, lines, i, out, stale)
    return "\n".join(out)


def picture(path, lines, i, out, stale):
    """Copy line ``i`` into ``out``, or the picture that starts there, made again; the next
    line's index."""
    if not lines[i].startswith("<!-- picture"):
        out.append(lines[i])
        return i + 1
    first = i
    while not lines[i].rstrip().endswith("-->"):
        i += 1
    out.extend(lines[first:i + 1])
    m = MARK.fullmatch(" ".join(s.strip() for s in lines[first:i + 1]))
    i += 1
    if not m or i >= len(lines) or not lines[i].startswith("```"):
        sys.exit(f"{path}:{first + 1}: a picture comment must be followed by a fenced block")
    end = lines.index("```", i + 1)  # the block's closing fence
    cmd = m.group(2)
    run = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
    shown = [s.rstrip() for s in (run.stdout + run.stderr).rstrip("\n").split("\n")]
    if m.group(1) and len(shown) > int(m.group(1)):
        shown = shown[: int(m.group(1))] + ["..."]
    block = [lines[i], *shown_command(cmd), *shown, "```"]
    if block != lines[i:end + 1]:
        stale.append(f"{path}:{first + 1}: {cmd}")
    out.extend(block)
    return end + 1


stale = []
for path in ("README.md", "docs/cli.md"):
    text = pictures(path, stale)
    if not check:
        open(path, "w", encoding="utf-8").write(text)
if check:
    print("\n".join(stale) or "pictures: up to date")
    sys.exit(1 if stale else 0)
print(f"{len(stale)} picture(s) rewritten")
EOF

[ "${1:-}" = "--check" ] && exit 0
chromium="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$chromium" ]; then
  echo "chromium is not installed: docs/screenshots/readme_report_html.png not redrawn" >&2
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
graphscope report tests/data/demo/gpt_step --html "$tmp/report.html" >/dev/null
"$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$tmp/profile" --window-size=1280,660 \
  --screenshot="$tmp/shot.png" "file://$tmp/report.html#tab=icicle" >/dev/null 2>&1
cp "$tmp/shot.png" docs/screenshots/readme_report_html.png
echo "Wrote docs/screenshots/readme_report_html.png"
