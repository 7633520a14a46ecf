#!/usr/bin/env bash
# The checks a kernel or launch change needs, on the GPU machine, from the bundle that
# ../shared/gpu-bundle.sh builds into .gpu/ (carry [".gpu"], and ".gpu-old" for a comparison).
#   bash bench/gpu-check.sh tests      every bundled test binary (GPU tests run for real there)
#   bash bench/gpu-check.sh sanitize   compute-sanitizer memcheck and racecheck on small cases
#   bash bench/gpu-check.sh bench N    the benchmark, N times alternating with .gpu-old/host if
#                                      it exists (same call: same card, same clocks)
#   bash bench/gpu-check.sh lessons    the lessons table, its JSON and SVG, and ptxas -v of the
#                                      kernels (from .gpu/ptx/, which this script's caller copies)
#   bash bench/gpu-check.sh stalls KERNEL SIZE [SKIP]
#                                      ncu's stall samples by instruction for one launch of the
#                                      kernel matching the regex KERNEL in `host bench --sizes
#                                      SIZE` (after SKIP such launches), summarized by
#                                      bench/stalls.py, and the math pipes' utilization
#   bash bench/gpu-check.sh python     the Python package's tests (PyTorch and JAX on the GPU),
#                                      bench/python_speed.py and bench/python_call_pieces.py,
#                                      from the wheels in .gpu/wheel/
#                                      (the caller puts there the wheel of `maturin build
#                                      --release -m python/Cargo.toml` and pytest's, from
#                                      `pip download pytest`: that machine has no network)
# Logs and JSON reports go to $OUT (or ./gpu-check-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
status=0
case "${1:-tests}" in
tests)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  for t in .gpu/bin/test-*; do
    echo "== $t"
    log="$out/$(basename "$t").log"
    "$t" >"$log" 2>&1 || status=1
    grep -E "^test result|FAILED|panicked|ignored, " "$log"
  done
  ;;
sanitize)
  # Small shapes of every kernel family: split (7x33, 4096x64), paired (the smallest
  # batches that take it: 70000x64, 150000x36; the paired single step: 200000x36,
  # 100000x256, and 20000x64 for every target), unsplit and staged target
  # (1000x100, 5x333), the stats-update path of long rows (3x1025), moments and trace, the
  # per-dimension scales (in registers, staged, the run's single steps) and the non-finite
  # counts; the block-per-row steps and the normals' kernel; and, for every target, its
  # streamed, staged and block-per-row single steps and its split, staged-target and
  # long-row runs.
  target_cases=$(.gpu/bin/test-test-gpu_targets --list 2>/dev/null | sed -n -E \
    's/^((step_matches_cpu::[^:]+::(20000x64|50x257|300x1024|1100x2048|260x8192)::portable_false)|(run_equals_single_steps::[^:]+::(4096x64|300x300|64x1030|700x4096|150x6144))): test$/\1/p')
  cases="fused_equals_single_steps::7x33::k5 fused_equals_single_steps::4096x64::k20
    fused_equals_single_steps::1000x100::k3 fused_equals_single_steps::5x333::k7
    fused_equals_single_steps::3x1025::k3 fused_equals_single_steps::70000x64::k3
    fused_equals_single_steps::150000x36::k2 moments_and_trace::40x333 moments_and_trace::6x1030
    gpu_matches_cpu::InKernelRng::5500x2052 gpu_matches_cpu::CallerNoise::5500x2052
    gpu_matches_cpu::InKernelRng::2200x4096
    gpu_matches_cpu::InKernelRng::301x5000 gpu_matches_cpu::CallerNoise::301x5000
    gpu_matches_cpu::InKernelRng::200000x36 gpu_matches_cpu::InKernelRng::100000x256
    normals_are_within_their_bound
    lesson_matches_cpu::1::37x12 lesson_matches_cpu::2::5x260 lesson_matches_cpu::3::1000x64
    lesson_matches_cpu::4::300x1024 lesson_matches_cpu::5::5x260 lesson_matches_cpu::6::300x1024
    lesson_matches_cpu::7::300x1024 lesson_matches_cpu::8::1000x64 lesson_matches_cpu::9::5x260
    fast_log_lesson_equals_the_fused_kernel::15::5x260::k9
    fast_log_lesson_equals_the_fused_kernel::15::4096x64::k20 fused_lesson_matches_cpu::11::5x260
    scales_of_one_change_nothing::3000x33 scaled_run_matches_cpu::600x300
    scaled_run_matches_cpu::50x1025 nonfinite_counts_are_exact::64x10
    nonfinite_counts_are_exact::8x1030 hand_over_during_a_run::3000x33
    dense_gaussian_matches_cpu matches_cpu::sblri-blr matches_cpu::wells_data-wells_dist
    matches_cpu::eight_schools-eight_schools_noncentered"
  # The diagnostics' kernels: the sums, the split halves' merge (rows in registers and the
  # long rows' stats update).
  diag_cases="gpu_diagnostics_match_the_moments::512x70::m8
    split_diagnostics_match_the_trace::512x70::m8 split_diagnostics_match_the_trace::64x1030::m2"
  for tool in memcheck racecheck; do
    for c in $cases $target_cases $diag_cases; do
      log="$out/sanitize-$tool-${c//:/_}.log"
      # The GPU test binary that has this case (gpu, gpu_runs, gpu_traces, gpu_diagnostics).
      binary=$(for b in .gpu/bin/test-test-gpu*; do
        "$b" --list 2>/dev/null | grep -qx "$c: test" && echo "$b"; done | head -1)
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$binary" --exact "$c" >"$log" 2>&1
      rc=$?
      echo "$tool $c: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1), $(grep -cE '^test .* ok$' "$log") ok"
      [ $rc -eq 0 ] || status=1
    done
  done
  ;;
bench)
  for i in $(seq "${2:-1}"); do
    if [ -x .gpu-old/host ]; then
      echo "== old $i"
      .gpu-old/host --json "$out/old-$i.json" >"$out/old-$i.txt" 2>&1 || status=1
      tail -n 12 "$out/old-$i.txt"
    fi
    echo "== new $i"
    .gpu/bin/host --json "$out/new-$i.json" >"$out/new-$i.txt" 2>&1 || status=1
    tail -n 12 "$out/new-$i.txt"
  done
  ;;
stalls)
  # One launch, profiled: the stall sampling by instruction (SourceCounters) and the pipes'
  # utilization (ComputeWorkloadAnalysis: `sm__inst_executed_pipe_*`, `sm__pipe_*_cycles_active`
  # in the report's raw page, e.g. fmaheavy, where sm_90 runs integer multiplies).
  report="$out/stalls-${2//[^A-Za-z0-9_]/_}-$3"
  ncu --kernel-name "regex:$2" --launch-skip "${4:-3}" --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis \
    -o "$report" .gpu/bin/host bench --sizes "$3" --mode rng --reps 5 --untimed-launches 2 \
    >"$report.log" 2>&1 || status=1
  ncu -i "$report.ncu-rep" --page source --csv --print-source sass >"$report.csv" || status=1
  python3 bench/stalls.py "$report.csv" || status=1
  ncu -i "$report.ncu-rep" --page raw --csv >"$report-raw.csv" || status=1
  python3 - "$report-raw.csv" <<'PY' || status=1
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    sys.exit(f"{sys.argv[1]}: no metrics (the header, the units and one launch's row expected)")
for name, unit, value in zip(rows[0], rows[1], rows[2]):
    if ("pipe_" in name and "pct_of_peak_sustained_active" in name) or "issue_active" in name:
        print(f"  {name:70} {value} {unit}")
PY
  xz -f "$report.csv" "$report-raw.csv"
  rm -f "$report.ncu-rep"
  ;;
python)
  # The wheel's files and its fused-mh command (in $site/bin, put on the PATH as pip's
  # scripts folder is): the machine's own python3 keeps its torch and JAX.
  site=$(mktemp -d)
  python3 -m pip install -q --no-deps --no-index --target "$site" .gpu/wheel/*.whl 2>&1 | grep -v WARNING
  export PYTHONPATH=$site PATH=$site/bin:$PATH FUSED_MH_HOST=$PWD/.gpu/bin/host
  python3 -m pytest -q -rs -p no:cacheprovider python/tests >"$out/pytest.log" 2>&1 || status=1
  tail -25 "$out/pytest.log"
  # The Rust benchmark's single step at (4096, 64) and (1048576, 64) on the H200 (session 7).
  python3 bench/python_speed.py --kernel-us 4.64 140.7 --host "$FUSED_MH_HOST" \
    "$out/python-speed.json" || status=1
  # Where a Model call's time goes: each piece of its path, in fresh interpreters.
  python3 bench/python_call_pieces.py --runs 5 "$out/python-pieces.json" || status=1
  ;;
lessons)
  .gpu/bin/host lessons --json "$out/lessons.json" --svg "$out/lessons.svg" || status=1
  for ptx in .gpu/ptx/*.ptx; do
    regs="$out/registers-$(basename "$ptx" .ptx).txt"
    ptxas -arch=sm_90 -v "$ptx" -o /dev/null 2>&1 \
      | awk -F"'" '/Compiling entry function/ {f=$2} /Used [0-9]+ registers/ {sub(/.*Used/, "Used"); print f ": " $0}' >"$regs"
    echo "== registers ($ptx, ptxas -arch=sm_90)"
    grep -E "^(lesson[0-9]+_[a-z0-9_]+|mh_step_(staged_q2_v4|q2_v4|staged_q8_v4)_gaussian):" "$regs"
  done
  ;;
esac
echo "gpu-check $1: exit $status"
exit $status
