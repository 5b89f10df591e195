#!/usr/bin/env bash
# The GPU machine's checks in one run (under 8 minutes): environment, a smoke test, the CUDA
# tests, the OpInfo suite on CUDA against the CPU, and the overhead benchmark on cuda; a
# summary table last. Run from the repository root:  bash tests/gpu/run_gpu_checks.sh
# Logs go to $OUT (the device machine's return folder) when it is set, else to ./gpu_logs.
#   EMBER_CUDA_OPINFO_DTYPES  dtypes of the OpInfo forward checks (default float32,float64)
#   GPU_CHECKS_ONLY           a space-separated subset of: smoke tests opinfo bench gpubench
set -u
cd "$(dirname "$0")/../.."
LOGS=${OUT:-gpu_logs}
mkdir -p "$LOGS"
exec > >(tee "$LOGS/gpu_checks.log") 2>&1
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
ONLY=${GPU_CHECKS_ONLY:-smoke tests opinfo bench gpubench}
START=$(date +%s)
SUMMARY=()

wanted() { [[ " $ONLY " == *" $1 "* ]]; }

# seconds a phase may take: its own cap, less whatever would push the run past 7.5 minutes
# (RESERVE: what the phases after it need)
limit() {
    local cap=$1 reserve=$2 left=$(( 450 - ($(date +%s) - START) - $2 ))
    (( left < cap )) && cap=$left
    (( cap < 10 )) && cap=10
    echo $cap
}

# counts of a pytest log written with -v (works on a run cut short by its time limit)
counts() {
    local log=$1
    printf "%s passed, %s failed, %s errors, %s skipped" \
        "$(grep -c ' PASSED' "$log")" "$(grep -c ' FAILED' "$log")" \
        "$(grep -c ' ERROR' "$log")" "$(grep -c ' SKIPPED' "$log")"
}

# phase NAME SECONDS COMMAND...: run with a time limit, record status and duration
phase() {
    local name=$1 limit=$2
    shift 2
    echo
    echo "=== $name (limit ${limit}s) ==="
    local t0=$(date +%s)
    timeout -s INT -k 15 "$limit" "$@"
    local rc=$? note=""
    [[ $rc == 124 || $rc == 130 || $rc == 137 ]] && note=" (cut at ${limit}s)"
    LAST_RC=$rc
    LAST_TIME=$(( $(date +%s) - t0 ))
    LAST_NOTE="rc=$rc$note"
}

echo "=== environment ==="
$PY - <<'EOF'
import importlib, platform, subprocess
print("python", platform.python_version(), "on", platform.machine())
missing = []
for name in ("numpy", "scipy", "ml_dtypes", "safetensors", "tqdm", "pytest", "xdist",
             "pytest_timeout", "cupy", "triton", "torch"):
    try:
        mod = importlib.import_module(name)
        print(f"  {name:15s} {getattr(mod, '__version__', '?')}")
    except Exception as e:                     # report and go on: later phases say what broke
        missing.append(name)
        print(f"  {name:15s} MISSING ({type(e).__name__}: {e})")
if missing:
    print("MISSING MODULES:", " ".join(missing),
          "- carry them as wheels (see the device tool's notes)")
try:
    import cupy
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    print("GPU:", props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
          f"cc {props['major']}.{props['minor']},", f"{props['totalGlobalMem'] / 2**30:.1f} GiB,",
          "CUDA runtime", rt.runtimeGetVersion(), "driver", rt.driverGetVersion())
except Exception as e:
    print("CuPy sees no GPU:", type(e).__name__, e)
try:
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip())
except OSError:
    pass
EOF

if wanted smoke; then
    phase smoke "$(limit 75 360)" $PY - <<'EOF'
# One line per CUDA path, each independent, so one failure does not hide the others.
import traceback
import ember


def recurrent_steps_match_cpu():
    same = []
    for make in (ember.nn.LSTM, ember.nn.GRU, ember.nn.RNN):
        ember.manual_seed(0)
        host, gpu = make(8, 24, num_layers=2), make(8, 24, num_layers=2).cuda()
        gpu.load_state_dict(host.state_dict())
        x, results = ember.randn(5, 3, 8), []
        for model, device in ((host, "cpu"), (gpu, "cuda")):
            with ember.backends.cudnn.flags(enabled=True, allow_tf32=False):
                out = model(x.to(device))[0]
                out.square().sum().backward()
            results.append((out.detach().cpu(), model.weight_hh_l0.grad.cpu()))
        same.append(all(ember.allclose(a, b, atol=1e-4, rtol=1e-4) for a, b in zip(*results)))
    return tuple(same)


checks = {
    "is_available": lambda: ember.cuda.is_available(),
    "zeros on cuda": lambda: ember.zeros(3, device="cuda").device,
    "cpu -> cuda (.cuda())": lambda: ember.ones(3).cuda().device,
    "cuda -> cpu": lambda: ember.ones(3, device="cuda").cpu().tolist(),
    "add on cuda": lambda: (ember.ones(3, device="cuda") + 1).tolist(),
    "bfloat16 on cuda": lambda: ember.ones(3, device="cuda", dtype=ember.bfloat16).exp().tolist(),
    "matmul on cuda": lambda: (ember.ones(4, 4, device="cuda") @ ember.ones(4, 4, device="cuda")).sum().item(),
    "cuda + cpu scalar tensor": lambda: (ember.ones(2, device="cuda") * ember.tensor(2.0)).tolist(),
    "device mismatch message": lambda: ember.ones(2, device="cuda") + ember.ones(2),
    "backward on cuda": lambda: ember.ones(2, device="cuda", requires_grad=True).exp().sum().backward(),
    "rand on cuda": lambda: ember.rand(3, device="cuda").device,
    "dropout on cuda": lambda: ember.nn.functional.dropout(ember.ones(8, device="cuda"), 0.5).device,
    "Linear on cuda": lambda: ember.nn.Linear(4, 2).cuda()(ember.ones(3, 4, device="cuda")).shape,
    "pin_memory": lambda: ember.ones(4).pin_memory().is_pinned(),
    "memory_allocated": lambda: ember.cuda.memory_allocated(),
    "Triton kernels loaded": lambda: sorted(__import__(
        "ember.backend.cuda_kernels", fromlist=["OVERRIDES"]).OVERRIDES),
    "softmax kernel": lambda: ember.softmax(ember.ones(2, 3, device="cuda"), -1).sum().item(),
    "flash attention (256.0)": lambda: ember.nn.functional.scaled_dot_product_attention(
        *(ember.ones(1, 2, 8, 16, device="cuda", dtype=ember.bfloat16),) * 3,
        is_causal=True).float().sum().item(),
    "max pooling kernel": lambda: ember.nn.functional.max_pool2d(
        ember.arange(16.0, device="cuda").view(1, 4, 4), 2, return_indices=True)[1].tolist(),
    "implicit-GEMM conv2d (18.0, then the weight gradient's 25.0)": lambda: (lambda x, w: (
        ember.nn.functional.conv2d(x, w, padding=1)[0, 0, 2, 2].item(),
        ember.nn.functional.conv2d(x, w, padding=1).sum().backward() or w.grad[0, 0, 1, 1].item()))(
        ember.ones(1, 2, 5, 5, device="cuda"), ember.ones(3, 2, 3, 3, device="cuda", requires_grad=True)),
    "random numbers on the GPU (mean near 0.5, 0)": lambda: (
        ember.rand(10 ** 6, device="cuda").mean().item(), ember.randn(10 ** 6, device="cuda").mean().item()),
    "bf16 matmul (native unless listed)": lambda: ((ember.ones(64, 64, device="cuda",
        dtype=ember.bfloat16) @ ember.ones(64, 64, device="cuda", dtype=ember.bfloat16))
        .float().mean().item(), sorted(map(str, ember.backend._UPCAST_PRODUCTS)) or "native"),
    "float32 GEMM compute type (1 default, 7 TF32)": lambda: ember.backend.cuda_backend()
        ._GEMM.get_compute_type(__import__("numpy").float32),
    "AdamW, SGD, RMSprop, Adagrad, Adadelta steps, clipping (multi-tensor kernels)": lambda: [
        (lambda m, o: (m(ember.ones(2, 4, device="cuda")).sum().backward(),
                       ember.nn.utils.clip_grad_norm_(m.parameters(), 1.0), o.step(),
                       m.weight.sum().item())[-1])(m, opt(m.parameters(), lr=0.1))
        for m, opt in ((ember.nn.Linear(4, 3).cuda(), ember.optim.AdamW),
                       (ember.nn.Linear(4, 3).cuda(), ember.optim.SGD),
                       (ember.nn.Linear(4, 3).cuda(), ember.optim.RMSprop),
                       (ember.nn.Linear(4, 3).cuda(), ember.optim.Adagrad),
                       (ember.nn.Linear(4, 3).cuda(), ember.optim.Adadelta))],
    "batch, group and RMS norm kernels (0.0 1.0, 0.0 1.0, 16.0)": lambda: (
        (lambda y: (round(y.mean().item(), 4), round(y.std(unbiased=False).item(), 3)))(
            ember.nn.functional.batch_norm(ember.arange(24.0, device="cuda").view(2, 3, 4),
                                           None, None, training=True)),
        (lambda y: (round(y.mean().item(), 4), round(y.std(unbiased=False).item(), 3)))(
            ember.nn.functional.group_norm(ember.arange(24.0, device="cuda").view(2, 4, 3), 2)),
        ember.nn.functional.rms_norm(ember.ones(2, 8, device="cuda"), (8,)).sum().item()),
    "3-D, grouped and depthwise conv kernels (27.0, 18.0, 9.0)": lambda: (
        ember.nn.functional.conv3d(ember.ones(1, 1, 3, 3, 3, device="cuda"),
                                   ember.ones(1, 1, 3, 3, 3, device="cuda"), padding=1)[
            0, 0, 1, 1, 1].item(),
        ember.nn.functional.conv2d(ember.ones(1, 4, 3, 3, device="cuda"),
                                   ember.ones(2, 2, 3, 3, device="cuda"), padding=1,
                                   groups=2)[0, 1, 1, 1].item(),
        ember.nn.functional.conv2d(ember.ones(1, 2, 3, 3, device="cuda"),
                                   ember.ones(2, 1, 3, 3, device="cuda"), padding=1,
                                   groups=2)[0, 1, 1, 1].item()),
    "attention with a mask, dropout and grouped heads (finite, finite)": lambda: (
        ember.nn.functional.scaled_dot_product_attention(
            *(ember.randn(2, 4, 8, 16, device="cuda", dtype=ember.bfloat16),) * 3,
            attn_mask=ember.rand(8, 8, device="cuda") > 0.2, dropout_p=0.1
        ).float().isfinite().all().item(),
        ember.nn.functional.scaled_dot_product_attention(
            ember.randn(2, 4, 8, 16, device="cuda"), *(ember.randn(2, 2, 8, 16,
                                                                   device="cuda"),) * 2,
            is_causal=True, enable_gqa=True).isfinite().all().item()),
    "randperm and multinomial on the GPU ([0..7], [0, 1, 2, 3])": lambda: (
        sorted(ember.randperm(8, device="cuda").tolist()),
        sorted(ember.multinomial(ember.ones(4, device="cuda"), 4).tolist())),
    "LSTM, GRU and RNN steps in one launch each (True, True, True)": recurrent_steps_match_cpu,
    "kernels switched off": lambda: __import__(
        "ember.backend.cuda_kernels", fromlist=["DISABLED"]).DISABLED or "none",
}
for name, fn in checks.items():
    try:
        print(f"  ok    {name}: {fn()}")
    except Exception as e:
        print(f"  FAIL  {name}: {type(e).__name__}: {str(e)[:300]}")
        print("        " + traceback.format_exc().strip().splitlines()[-3].strip())
EOF
    SUMMARY+=("smoke|$LAST_NOTE|see the ok/FAIL lines above|$LAST_TIME")
fi

PYTEST=($PY -m pytest -o addopts= -p no:cacheprovider -v -rfE --tb=short)
$PY -c "import pytest_timeout" 2>/dev/null && PYTEST+=(--timeout 120)
XDIST=()
$PY -c "import xdist" 2>/dev/null && XDIST=(-n 8)

if wanted tests; then
    phase "CUDA tests" "$(limit 100 260)" "${PYTEST[@]}" "${XDIST[@]}" tests/gpu -m cuda \
        --ignore=tests/gpu/test_opinfo_cuda.py > "$LOGS/cuda_tests.log" 2>&1
    grep -E '^(FAILED|ERROR) ' "$LOGS/cuda_tests.log" | head -40
    tail -1 "$LOGS/cuda_tests.log"
    SUMMARY+=("CUDA tests|$LAST_NOTE|$(counts "$LOGS/cuda_tests.log")|$LAST_TIME")
fi

if wanted opinfo; then
    echo "OpInfo dtypes: ${EMBER_CUDA_OPINFO_DTYPES:=float32,float64}"
    export EMBER_CUDA_OPINFO_DTYPES
    phase "OpInfo on CUDA" "$(limit 130 130)" "${PYTEST[@]}" "${XDIST[@]}" \
        tests/gpu/test_opinfo_cuda.py \
        > "$LOGS/opinfo_cuda.log" 2>&1
    echo "first failures (all in opinfo_cuda.log):"
    grep -E '^(FAILED|ERROR) ' "$LOGS/opinfo_cuda.log" | cut -c1-220 | head -60
    tail -1 "$LOGS/opinfo_cuda.log"
    SUMMARY+=("OpInfo on CUDA|$LAST_NOTE|$(counts "$LOGS/opinfo_cuda.log")|$LAST_TIME")
fi

if wanted bench; then
    phase "benchmark (cuda)" "$(limit 30 100)" $PY benchmarks/overhead.py --quick --device cuda \
        > "$LOGS/bench.log" 2>&1
    cat "$LOGS/bench.log" | tail -40
    SUMMARY+=("benchmark (cuda)|$LAST_NOTE|table above|$LAST_TIME")
fi

if wanted gpubench; then
    # AMP convergence (the issue's done-criterion) first, then the steps, then the ops, so a
    # run cut at its limit loses the least needed
    phase "AMP, steps, kernels (cuda)" "$(limit 100 0)" $PY benchmarks/cuda.py --quick \
        --only amp,steps,ops > "$LOGS/cuda_bench.log" 2>&1
    cat "$LOGS/cuda_bench.log" | tail -40
    SUMMARY+=("GPU bench + AMP|$LAST_NOTE|table above|$LAST_TIME")
fi

echo
echo "=== summary ($(( $(date +%s) - START ))s in all) ==="
printf "%-18s %-22s %-55s %6s\n" phase status result seconds
for row in "${SUMMARY[@]}"; do
    IFS='|' read -r name status result secs <<< "$row"
    printf "%-18s %-22s %-55s %6s\n" "$name" "$status" "$result" "$secs"
done
