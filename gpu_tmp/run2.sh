set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/install.txt 2>&1 || { tail -30 $OUT/install.txt; exit 1; }
echo "install $(( $(date +%s) - t0 )) s"
timeout 420 python3 -m pytest -q -p no:cacheprovider -rA tests/gpu/test_try_gpu.py > $OUT/try_gpu.txt 2>&1; echo "try rc $? $(( $(date +%s) - t0 )) s"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/try_gpu.txt | cut -c1-200
timeout 100 python3 bench/bench_diagnosis.py $OUT/bench_diagnosis.json > $OUT/bench_diag.txt 2>&1; echo "bench rc $? $(( $(date +%s) - t0 )) s"; tail -5 $OUT/bench_diag.txt
