set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/install.txt 2>&1 || { tail -30 $OUT/install.txt; exit 1; }
echo "install $(( $(date +%s) - t0 )) s"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rA tests/gpu/test_try_gpu.py -k "resnet18 or user_step" > $OUT/try_gpu.txt 2>&1; echo "try rc $? $(( $(date +%s) - t0 )) s"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " $OUT/try_gpu.txt | cut -c1-300 | head -20
grep -E "^step \{|gradients|state" $OUT/try_gpu.txt | cut -c1-400 | head
timeout 200 python3 -m pytest -q -p no:cacheprovider -rA tests/gpu/test_diagnosis_gpu.py -k "one_stream_branches or run_bundles" > $OUT/diag_gpu.txt 2>&1; echo "diag rc $? $(( $(date +%s) - t0 )) s"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|^E " $OUT/diag_gpu.txt | cut -c1-300 | head -20
timeout 300 python3 bench/whatif_accuracy.py $OUT/whatif_accuracy.json > $OUT/whatif.txt 2>&1; echo "whatif rc $? $(( $(date +%s) - t0 )) s"
tail -15 $OUT/whatif.txt
