"""GPU benchmarks, ember against PyTorch on the same device in one process: the fused
kernels' ops, GEMM and convolution, training steps at sizes that keep a GPU busy, and the
GPT example (examples/char_gpt.py) trained in bfloat16 autocast against float32.

    python benchmarks/cuda.py [--device cuda] [--quick]

``--device cpu`` runs the same program at small sizes (to check the script itself).
"""

import argparse
import os
import runpy
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

import train_steps  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:                 # the ember column alone
    torch = None


def _timer(lib, device):
    def wait():
        if device != "cpu":
            lib.cuda.synchronize()
    return wait


def time_ms(fn, wait, min_time):
    """Best mean time of ``fn`` in ms over rounds of at least ``min_time`` seconds."""
    fn()
    wait()
    best = float("inf")
    for _ in range(3):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            if n >= 3 and time.perf_counter() - start >= min_time / 3:
                break
        wait()
        best = min(best, (time.perf_counter() - start) / n * 1e3)
    return best


def _im2col(lib, fn):
    """``fn`` with ember's implicit-GEMM convolution kernels off (im2col or col2im + cuBLAS
    instead), to choose between them by measurement; PyTorch's ``fn`` as it is."""
    if lib is not ember:
        return fn
    kernels = ember.backend.DEVICE_KERNELS

    def run():
        saved = {name: kernels.pop(name) for name in ("convolution", "convolution_input",
                                                      "convolution_weight") if name in kernels}
        try:
            return fn()
        finally:
            kernels.update(saved)
    return run


def _gemm_apart(lib, fn):
    """``fn`` with an LSTM step's recurrent GEMM in cuBLAS before its cell kernel (two
    launches a step, not one), to choose between them by measurement; PyTorch's as it is."""
    recurrent = sys.modules.get("ember.backend.cuda_kernels.recurrent")  # loaded with the kernels
    if lib is not ember or recurrent is None:
        return fn

    def run():
        recurrent.RECURRENT_GEMM_IN_KERNEL = False
        try:
            return fn()
        finally:
            recurrent.RECURRENT_GEMM_IN_KERNEL = True
    return run


def op_workloads(lib, scale):
    """name -> a no-argument function running one op (no gradient), sizes divided by
    ``scale``."""
    F = lib.nn.functional
    gen = np.random.default_rng(0)

    def randn(*shape, dtype=np.float32):
        return lib.tensor(gen.standard_normal(shape).astype(dtype))
    rows, cols, vocab = 8192 // scale, 1024, 32768 // scale
    x, w, b = randn(rows, cols), randn(cols), randn(cols)
    logits, target = randn(4096 // scale, vocab), lib.tensor(gen.integers(0, vocab, 4096 // scale))
    soft_target = F.softmax(randn(4096 // scale, vocab), -1)
    big = randn(16 * 2 ** 20 // scale ** 2)
    n = 4096 // scale
    a, c = randn(n, n), randn(n, n)
    a16, c16 = a.to(lib.bfloat16), c.to(lib.bfloat16)
    image = randn(64 // scale, 64, 56 // scale, 56 // scale)
    conv = lib.nn.Conv2d(64, 64, 3, padding=1)
    pointwise_conv = lib.nn.Conv2d(64, 256, 1)
    depthwise_conv = lib.nn.Conv2d(64, 64, 3, padding=1, groups=64)
    grouped_conv = lib.nn.Conv2d(64, 64, 3, padding=1, groups=8)
    volume = randn(4, 32, 16 // scale, 32 // scale, 32 // scale)
    volume_conv = lib.nn.Conv3d(32, 32, 3, padding=1)
    upsample = lib.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1)
    running, affine = (lib.zeros(64), lib.ones(64)), (randn(64), randn(64))
    q, k, v = (randn(16 // scale, 16, 1024 // scale, 64) for _ in range(3))
    q16, k16, v16 = (t.to(lib.bfloat16) for t in (q, k, v))
    padding = lib.ones(q.shape[0], 1, 1, k.shape[2], dtype=lib.bool)  # BERT-style: keys kept
    padding[:, ..., k.shape[2] * 3 // 4:] = False
    lstm = lib.nn.LSTM(1024 // scale, 1024 // scale)
    sequence = randn(35, 64 // scale, 1024 // scale)
    params = [lib.nn.Parameter(randn(1000, 1000 // scale)) for _ in range(10)]
    for p in params:
        p.grad = lib.ones_like(p)
    adam = lib.optim.Adam(params, lr=1e-3)
    grad = lib.no_grad()
    grad.__enter__()                                # op timings without graph recording
    return {
        f"softmax {rows}x{cols}": lambda: F.softmax(x, -1),
        f"log_softmax {rows}x{cols}": lambda: F.log_softmax(x, -1),
        f"layer_norm {rows}x{cols}": lambda: F.layer_norm(x, (cols,), w, b),
        f"rms_norm {rows}x{cols}": lambda: F.rms_norm(x, (cols,), w),
        f"cross_entropy {logits.shape[0]}x{vocab}": lambda: F.cross_entropy(logits, target),
        f"cross_entropy {logits.shape[0]}x{vocab}, class probabilities": lambda:
            F.cross_entropy(logits, soft_target),
        f"gelu {big.numel()}": lambda: F.gelu(big),
        f"silu {big.numel()}": lambda: F.silu(big),
        f"add {big.numel()}": lambda: big + big,
        f"exp {big.numel()}": lambda: big.exp(),
        f"LSTM layer on {tuple(sequence.shape)}": lambda: lstm(sequence),
        "LSTM layer, cuBLAS GEMM + cell kernel": _gemm_apart(lib, lambda: lstm(sequence)),
        f"randn {big.numel()}": lambda: lib.randn(big.shape),
        f"dropout {big.numel()}": lambda: F.dropout(big, 0.1),
        f"Adam step, {sum(p.numel() for p in params)} params": adam.step,
        f"matmul {n}x{n} float32": lambda: a @ c,
        f"matmul {n}x{n} bfloat16": lambda: a16 @ c16,
        f"conv2d 64->64 3x3 on {tuple(image.shape)}": lambda: conv(image),
        "conv2d 64->64 3x3, im2col + GEMM": _im2col(lib, lambda: conv(image)),
        f"conv2d 64->256 1x1 on {tuple(image.shape)}": lambda: pointwise_conv(image),
        "conv2d 64->256 1x1, im2col + GEMM": _im2col(lib, lambda: pointwise_conv(image)),
        f"grouped conv2d 64->64 3x3 /8 on {tuple(image.shape)}": lambda: grouped_conv(image),
        "grouped conv2d 64->64 3x3 /8, im2col + GEMM": _im2col(lib, lambda: grouped_conv(image)),
        f"conv3d 32->32 3x3x3 on {tuple(volume.shape)}": lambda: volume_conv(volume),
        "conv3d 32->32 3x3x3, im2col + GEMM": _im2col(lib, lambda: volume_conv(volume)),
        f"depthwise conv2d 64 3x3 on {tuple(image.shape)}": lambda: depthwise_conv(image),
        "depthwise conv2d 64 3x3, im2col + GEMM": _im2col(lib, lambda: depthwise_conv(image)),
        f"convT 64->32 4x4/2 on {tuple(image.shape)}": lambda: upsample(image),
        "convT 64->32 4x4/2, col2im + GEMM": _im2col(lib, lambda: upsample(image)),
        f"batch_norm (training) on {tuple(image.shape)}": lambda: F.batch_norm(
            image, *running, *affine, training=True),
        f"group_norm (32 groups) on {tuple(image.shape)}": lambda: F.group_norm(
            image, 32, *affine),
        f"max_pool2d 3x3/2 on {tuple(image.shape)}": lambda: F.max_pool2d(image, 3, 2, 1),
        f"avg_pool2d 2x2 on {tuple(image.shape)}": lambda: F.avg_pool2d(image, 2),
        f"max_pool3d 3x3x3/2 on {tuple(volume.shape)}": lambda: F.max_pool3d(volume, 3, 2, 1),
        f"bilinear x2 on {tuple(image.shape)}": lambda: F.interpolate(
            image, scale_factor=2, mode="bilinear"),
        f"causal SDPA {tuple(q.shape)}": lambda: F.scaled_dot_product_attention(
            q, k, v, is_causal=True),
        f"causal SDPA {tuple(q.shape)} bfloat16": lambda: F.scaled_dot_product_attention(
            q16, k16, v16, is_causal=True),
        f"causal SDPA {tuple(q.shape)} bf16, dropout 0.1": lambda:
            F.scaled_dot_product_attention(q16, k16, v16, dropout_p=0.1, is_causal=True),
        f"SDPA {tuple(q.shape)} bfloat16, padding mask": lambda:
            F.scaled_dot_product_attention(q16, k16, v16, attn_mask=padding),
    }


# The step target holds where the GPU is busy: PyTorch's step taking at least this
BUSY_MS = 5.0


def step_workloads(scale):
    """name -> (first batch, maker(lib, batch)): training steps at GPU-sized batches."""
    return {
        "MLP 784-512-512-10": (8192 // scale, lambda lib, b: train_steps.mlp_784(lib, batch=b)),
        "LeNet": (4096 // scale, lambda lib, b: train_steps.lenet(lib, batch=b)),
        "ResNet block": (512 // scale, lambda lib, b: train_steps.resnet_block(lib, batch=b)),
        f"GPT 4x512, seq {256 // scale}": (32 // scale, lambda lib, b: train_steps.gpt(
            lib, n_layer=4, n_embd=512, n_head=8, seq=256 // scale, batch=b)),
        "LSTM LM 2x1024, seq 35": (64 // scale, lambda lib, b: train_steps.lstm_lm(
            lib, vocab=10000 // scale, hidden=1024 // scale, batch=b)),
    }


def busy_batch(batch, make, device, min_time, most=16):
    """The batch, doubled from ``batch`` up to ``most`` times it, at which PyTorch's step
    (``make(torch, batch)``) takes BUSY_MS or more; ``batch`` itself without PyTorch or a
    GPU."""
    if torch is None or device == "cpu":
        return batch
    for grown in (batch * 2 ** k for k in range(most.bit_length())):
        if time_ms(make(torch, grown), _timer(torch, device), min_time) >= BUSY_MS:
            return grown
    return grown


def host_ms(fn, wait):
    """Least time in ms that one call of ``fn`` keeps the host busy, starting from an idle
    GPU: close to the total time when the host, not the GPU, sets the pace."""
    best = float("inf")
    for _ in range(3):
        wait()
        start = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - start) * 1e3)
    wait()
    return best


def compare(label, ours, theirs, device, min_time):
    t_ours = time_ms(ours, _timer(ember, device), min_time)
    host = f"{host_ms(ours, _timer(ember, device)):10.3f}"
    t_theirs = None if theirs is None else time_ms(theirs, _timer(torch, device), min_time)
    ratio = "-" if t_theirs is None else f"{t_ours / t_theirs:7.2f}"
    theirs_text = "-" if t_theirs is None else f"{t_theirs:10.3f}"
    their_host = "-" if t_theirs is None else f"{host_ms(theirs, _timer(torch, device)):10.3f}"
    print(f"{label:44s} {t_ours:10.3f} {theirs_text:>10s} {ratio:>7s} {host:>10s} "
          f"{their_host:>10s}", flush=True)


def _guarded(label, make):
    try:
        return make()
    except Exception as e:                          # report the row and go on
        print(f"{label:44s} FAILED: {type(e).__name__}: {str(e)[:200]}", flush=True)
        return None


def amp_convergence(device, steps):
    """Train the GPT example (examples/char_gpt.py) in float32 and in bfloat16 autocast, on
    the same batches; print both loss curves and whether they agree."""
    example = runpy.run_path(str(EXAMPLES / "char_gpt.py"))
    curves = {}
    for label, amp in (("float32", "float32"), ("bfloat16 autocast", "bfloat16")):
        curves[label], _ = example["main"](["--device", device, "--amp", amp, "--steps",
                                            str(steps), "--log-every", str(steps),
                                            "--sample", "60"])
    marks = sorted({0, steps // 4, steps // 2, 3 * steps // 4, steps - 1})
    print(f"{'step':>6s} " + " ".join(f"{label:>18s}" for label in curves))
    for i in marks:
        print(f"{i:6d} " + " ".join(f"{c[i]:18.4f}" for c in curves.values()))
    tail = max(1, steps // 10)                  # the last tenth's mean, as batches vary
    f32, b16 = (sum(c[-tail:]) / tail for c in curves.values())
    start = curves["float32"][0]
    # like float32: the loss has fallen by half, and the curves end within 5% of the start
    verdict = "converges like float32" if b16 < 0.5 * start and abs(b16 - f32) < 0.05 * start \
        else "DIFFERS from float32"
    print(f"bfloat16 autocast {verdict}: final loss {b16:.4f} vs {f32:.4f} (start {start:.4f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=os.environ.get("DEVICE") or "cuda")
    parser.add_argument("--quick", action="store_true", help="shorter timings")
    parser.add_argument("--only", default="ops,steps,amp",
                        help="comma-separated parts, run in the order given")
    args = parser.parse_args()
    scale = 1 if args.device != "cpu" else 8
    min_time = 0.1 if args.quick else 0.3
    parts = args.only.split(",")
    ember.set_default_device(args.device)
    if torch:
        torch.set_default_device(args.device)
    name = ember.cuda.get_device_name() if args.device != "cpu" else "cpu"
    print(f"device: {name}   PyTorch: {torch.__version__ if torch else 'not installed'}"
          f"   {time.strftime('%Y-%m-%d')}")
    print(f"{'workload (ms)':44s} {'ember':>10s} {'torch':>10s} {'ratio':>7s} "
          f"{'ember host':>10s} {'torch host':>10s}")
    print("(host: the time one call keeps the host busy; near the total, the host sets the pace)")
    for part in parts:                  # in the order asked: a run cut short keeps the first
        if part == "ops":
            run_ops(args.device, scale, min_time)
        elif part == "steps":
            run_steps(args.device, scale, min_time)
        elif part == "amp":
            print()
            _guarded("AMP", lambda: amp_convergence(args.device,
                                                    (200 if args.quick else 300) // scale))


def run_ops(device, scale, min_time):
    """Time each op workload against PyTorch's."""
    ours = op_workloads(ember, scale)
    theirs = op_workloads(torch, scale) if torch else {}
    for label, fn in ours.items():
        _guarded(label, lambda: compare(label, fn, theirs.get(label), device, min_time))
    ember.set_grad_enabled(True)
    if torch:
        torch.set_grad_enabled(True)


def run_steps(device, scale, min_time):
    """Time each training step against PyTorch's, at a batch that keeps the GPU busy."""
    for name, (batch, make) in step_workloads(scale).items():
        def row(name=name, batch=batch, make=make):
            batch = busy_batch(batch, make, device, min_time / 3)
            ember.manual_seed(0)
            if torch:
                torch.manual_seed(0)
            compare(f"{name}, batch {batch}", make(ember, batch),
                    make(torch, batch) if torch else None, device, min_time)
        _guarded(name, row)


if __name__ == "__main__":
    main()
