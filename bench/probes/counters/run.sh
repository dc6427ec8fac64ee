#!/usr/bin/env bash
# Hardware-counter probe: builds counters_probe.cpp against the CUPTI
# headers of torch's CUDA wheel and runs probe.py, which prints one JSON document and writes
# it to $OUT/counters_probe.json (plus $OUT/pm_samples_*.json and $OUT/counters_build.log).
#
#   OUT=/writable/dir bash bench/probes/counters/run.sh      (from the repository root)
#
# Headers, first found wins: torch's wheel (nvidia/*/include next to its libcupti), then
# .probe_inc/ at the repository root (a copy of a pip nvidia/cu13/include), then the toolkit
# (/usr/local/cuda/include, /usr/local/cuda/extras/CUPTI/include). No link to libcupti or
# libcuda: probe.py dlopens the libcupti torch uses. Guarded by timeouts: the build 60 s, the
# probe 240 s (its own budget is 210 s, the ncu check included).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PY=${PYTHON:-python3}
BUILD=${TMPDIR:-/tmp}/gs_counters_probe
mkdir -p "$BUILD"
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; LOG=$OUT/counters_build.log; else LOG=$BUILD/build.log; fi
LIB=$BUILD/libgs_counters_probe.so
rm -f "$LIB"

WHEEL_INC=$(timeout 60 "$PY" - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
for root in roots:
    for d in sorted(glob.glob(os.path.join(root, "*", "include"))):
        if os.path.exists(os.path.join(d, "cupti_pmsampling.h")):
            print(d)
EOF
)
INCS=()
for d in $WHEEL_INC "$ROOT/.probe_inc" /usr/local/cuda/include /usr/local/cuda/extras/CUPTI/include; do
    [ -d "$d" ] && INCS+=("-I$d")
done
{
    echo "include dirs (first wins): ${INCS[*]:-none}"
    for h in cuda.h cupti_pmsampling.h cupti_range_profiler.h cupti_profiler_host.h; do
        found=none
        for i in "${INCS[@]}"; do [ -f "${i#-I}/$h" ] && { found=${i#-I}/$h; break; }; done
        echo "$h: $found"
    done
    g++ --version 2>&1 | head -1
} > "$LOG" 2>&1
timeout 60 g++ -std=c++17 -O1 -shared -fPIC -Wall -Wno-missing-field-initializers \
    "${INCS[@]}" "$HERE/counters_probe.cpp" -o "$LIB" -ldl >> "$LOG" 2>&1
echo "g++ exit: $?" >> "$LOG"
cat "$LOG" >&2

timeout -k 5 240 "$PY" "$HERE/probe.py" --lib "$LIB" --budget 210 --build-log "$LOG"
rc=$?
[ $rc -eq 124 ] && echo "probe.py hit run.sh's 240 s limit; \$OUT/counters_probe.json holds the steps done" >&2
exit $rc
