"""The Triton kernels checked without a GPU: each compiles for the H200's architecture
(sm_90) within its shared memory, and Triton's interpreter runs them on NumPy arrays against
NumPy references (tests/gpu/interpreted_kernels.py, in a process of its own). Skips without
Triton."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from ember.backend.cuda_kernels import triton_attention as attention  # noqa: E402
from ember.backend.cuda_kernels import triton_batch_norm as batch_norm  # noqa: E402
from ember.backend.cuda_kernels import triton_conv as conv  # noqa: E402
from ember.backend.cuda_kernels import triton_depthwise as depthwise  # noqa: E402
from ember.backend.cuda_kernels import triton_group_norm as group_norm  # noqa: E402
from ember.backend.cuda_kernels import triton_losses as losses  # noqa: E402
from ember.backend.cuda_kernels import triton_optimizers as optimizers  # noqa: E402
from ember.backend.cuda_kernels import triton_pointwise as pointwise  # noqa: E402
from ember.backend.cuda_kernels import triton_pooling as pooling  # noqa: E402
from ember.backend.cuda_kernels import triton_resample as resample  # noqa: E402
from ember.backend.cuda_kernels import triton_rnn as rnn  # noqa: E402
from ember.backend.cuda_kernels import triton_rnn_gemm as rnn_gemm  # noqa: E402
from ember.backend.cuda_kernels import triton_rows as rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_kernels_match_numpy_in_triton_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
         str(ROOT / "tests/gpu/interpreted_kernels.py")],
        env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def _pointers(names, dtype="fp32"):
    return {name: f"*{dtype}" for name in names}


def _cases():
    for dt in ("fp32", "bf16"):
        for tile, block in ((64, 64), (1, rows.MAX_ROW)):
            for log in (False, True):
                yield rows._softmax_kernel, dict(
                    _pointers(("x_ptr", "y_ptr"), dt), n_rows="i32", n_cols="i32"), \
                    dict(ROWS=tile, BLOCK=block, LOG=log)
                yield rows._softmax_backward_kernel, dict(
                    _pointers(("g_ptr", "y_ptr", "dx_ptr"), dt), n_rows="i32", n_cols="i32"), \
                    dict(ROWS=tile, BLOCK=block, LOG=log)
            yield rows._layer_norm_kernel, dict(
                _pointers(("x_ptr", "y_ptr", "mean_ptr", "invstd_ptr"), dt),
                w_ptr="*fp32", b_ptr="*fp32", n_rows="i32", n_cols="i32", eps="fp32"), \
                dict(ROWS=tile, BLOCK=block, HAS_W=True, HAS_B=True)
            yield rows._rms_norm_kernel, dict(
                _pointers(("x_ptr", "y_ptr"), dt), w_ptr="*fp32", rstd_ptr="*fp32",
                n_rows="i32", n_cols="i32", eps="fp32"), dict(ROWS=tile, BLOCK=block, HAS_W=True)
        for has_w, need_gx in ((True, True), (False, False)):
            yield rows._rms_norm_backward_kernel, dict(
                _pointers(("gy_ptr", "x_ptr", "gx_ptr"), dt), w_ptr="*fp32", rstd_ptr="*fp32",
                partial_w_ptr="*fp32", n_rows="i32", n_cols="i32"), \
                dict(BLOCK=1024, HAS_W=has_w, NEED_GX=need_gx)
            yield rows._layer_norm_backward_kernel, dict(
                _pointers(("gy_ptr", "x_ptr", "mean_ptr", "invstd_ptr", "gx_ptr"), dt),
                w_ptr="*fp32", partial_w_ptr="*fp32", partial_b_ptr="*fp32", n_rows="i32",
                n_cols="i32"), dict(BLOCK=1024, HAS_W=has_w, NEED_GX=need_gx)
        weights = dict(w_ptr="*fp32", w_sum_ptr="*fp32")
        for per_row, has_w in ((False, False), (True, True)):
            yield losses._cross_entropy_backward_kernel, dict(
                _pointers(("x_ptr", "dx_ptr"), dt), t_ptr="*i64", scale_ptr="*fp32",
                n_cols="i32", ignore_index="i64", smoothing="fp32", **weights), \
                dict(HAS_W=has_w, PER_ROW=per_row, BLOCK=4096)
        for has_w in (False, True):
            yield losses._soft_cross_entropy_kernel, dict(
                _pointers(("x_ptr", "t_ptr"), dt), w_ptr="*fp32", loss_ptr="*fp32",
                n_cols="i32", smoothing="fp32"), dict(HAS_W=has_w, BLOCK=4096)
            yield losses._soft_cross_entropy_backward_kernel, dict(
                _pointers(("x_ptr", "t_ptr", "dx_ptr"), dt), w_ptr="*fp32", scale_ptr="*fp32",
                n_cols="i32", smoothing="fp32"), dict(HAS_W=has_w, PER_ROW=has_w, BLOCK=4096)
        for smooth, has_w in ((False, False), (True, False), (True, True)):
            yield losses._cross_entropy_kernel, dict(
                x_ptr=f"*{dt}", t_ptr="*i64", loss_ptr="*fp32", n_cols="i32",
                ignore_index="i64", smoothing="fp32", **weights), \
                dict(HAS_W=has_w, SMOOTH=smooth, BLOCK=4096)
        for tanh in (False, True):
            yield pointwise._gelu_kernel, dict(_pointers(("x_ptr", "y_ptr"), dt), n="i32"), \
                dict(TANH=tanh, BLOCK=pointwise.BLOCK)
            yield pointwise._gelu_backward_kernel, dict(
                _pointers(("g_ptr", "x_ptr", "y_ptr"), dt), n="i32"), \
                dict(TANH=tanh, BLOCK=pointwise.BLOCK)
        yield pointwise._silu_backward_kernel, dict(
            _pointers(("g_ptr", "x_ptr", "dx_ptr"), dt), n="i32"), dict(BLOCK=pointwise.BLOCK)
        yield pointwise._silu_kernel, dict(_pointers(("x_ptr", "y_ptr"), dt), n="i32"), \
            dict(BLOCK=pointwise.BLOCK)
    ints = dict.fromkeys(("heads", "group", "L", "S", "E", "Ev", "sqb", "sqh", "sql", "skb", "skh",
                          "sks", "svb", "svh", "svs", "smb", "smh", "sml", "sms"), "i32")
    ints.update(seed="i64", offset="i64", p_drop="fp32")
    # (dtype, IEEE products, head size, key block, mask: 0 none, 1 boolean, 2 float)
    for dt, ieee, head, block_n, mask in (("fp32", True, 64, 64, 2), ("bf16", False, 64, 64, 0),
                                          ("bf16", False, 128, 32, 1),
                                          ("fp16", False, 16, 64, 2)):
        block = 64 if head <= 64 else 32
        m_ptr = {0: f"*{dt}", 1: "*u8", 2: "*fp32"}[mask]
        backward = dict(CAUSAL=not mask, MASK=mask, DROPOUT=mask == 1, IEEE=ieee,
                        BLOCK_M=block, BLOCK_N=block, HEAD=head, HEAD_V=head)
        yield attention._attention_backward_keys_kernel, dict(
            _pointers(("q_ptr", "k_ptr", "v_ptr", "do_ptr", "dk_ptr", "dv_ptr"), dt),
            lse_ptr="*fp32", delta_ptr="*fp32", m_ptr=m_ptr, scale="fp32", **ints), backward
        yield attention._attention_backward_queries_kernel, dict(
            _pointers(("q_ptr", "k_ptr", "v_ptr", "do_ptr", "dq_ptr"), dt),
            lse_ptr="*fp32", delta_ptr="*fp32", m_ptr=m_ptr, scale="fp32", **ints), backward
        for causal in (False, True):
            yield attention._attention_forward_kernel, dict(
                _pointers(("q_ptr", "k_ptr", "v_ptr", "o_ptr"), dt), lse_ptr="*fp32",
                m_ptr=m_ptr, scale="fp32", **ints), \
                dict(CAUSAL=causal, MASK=0 if causal else mask, DROPOUT=causal, IEEE=ieee,
                     BLOCK_M=64, BLOCK_N=block_n, HEAD=head, HEAD_V=head)
    for dt in ("i64", "i32", "u8", "fp32"):
        yield pointwise._randint_kernel, dict(out_ptr=f"*{dt}", n="i32", seed="i64",
                                              offset="i64", low="i64", span="i64"), \
            dict(BLOCK=pointwise.BLOCK)
    for dt in ("fp32", "bf16", "fp16"):
        for normal in (False, True):
            yield pointwise._random_kernel, dict(out_ptr=f"*{dt}", n="i32", seed="i64",
                                                 offset="i64", low="fp32", high="fp32"), \
                dict(NORMAL=normal, BLOCK=pointwise.BLOCK)
    for dt in ("fp32", "bf16"):
        for has_b in (False, True):
            yield rnn._lstm_step_kernel, dict(
                _pointers(("gh_ptr", "x_ptr", "b_ptr", "h_ptr", "c_ptr", "ws_ptr", "out_ptr"),
                          dt), hidden="i32", x_stride="i32", ws_stride="i32"), \
                dict(HAS_B=has_b, BLOCK=rnn.BLOCK)
        yield rnn._gru_step_kernel, dict(
            _pointers(("gh_ptr", "x_ptr", "b_ptr", "h_ptr", "ws_ptr", "out_ptr"), dt),
            hidden="i32", x_stride="i32", ws_stride="i32"), dict(HAS_B=True, BLOCK=rnn.BLOCK)
        yield rnn._gru_step_backward_kernel, dict(
            _pointers(("dout_ptr", "dh_ptr", "dhz_ptr", "ws_ptr", "dx_ptr", "dgh_ptr"), dt),
            hidden="i32", ws_stride="i32"), dict(BLOCK=rnn.BLOCK)
        yield rnn._lstm_step_backward_kernel, dict(
            _pointers(("dout_ptr", "dh_ptr", "dc_ptr", "ws_ptr", "dg_ptr"), dt), hidden="i32",
            ws_stride="i32"), dict(BLOCK=rnn.BLOCK)
        for batch, ieee in ((64, dt == "fp32"), (8, False)):
            tiles = dict(BLOCK_M=min(64, max(16, batch)), BLOCK_J=16, BLOCK_K=rnn_gemm.BLOCK_K)
            forward_ints = dict.fromkeys(("rows", "src_rows", "hidden", "x_stride", "ws_stride"),
                                         "i32")
            backward_ints = dict.fromkeys(("rows", "next_rows", "carry_k", "hidden",
                                           "ws_stride"), "i32")
            yield rnn_gemm._lstm_gemm_step_kernel, dict(
                _pointers(("src_ptr", "h0_ptr", "w_ptr", "x_ptr", "b_ptr", "h_ptr", "c_ptr",
                           "ws_ptr", "out_ptr"), dt), **forward_ints), \
                dict(HAS_B=True, IEEE=ieee, **tiles)
            yield rnn_gemm._lstm_gemm_step_backward_kernel, dict(
                _pointers(("dout_ptr", "dh_ptr", "dc_ptr", "ws_ptr", "dg_ptr", "next_ptr",
                           "w_ptr"), dt), **backward_ints), dict(IEEE=ieee, **tiles)
            yield rnn_gemm._gru_gemm_step_kernel, dict(
                _pointers(("src_ptr", "h0_ptr", "w_ptr", "x_ptr", "b_ptr", "h_ptr", "ws_ptr",
                           "out_ptr"), dt), **forward_ints), dict(HAS_B=True, IEEE=ieee, **tiles)
            yield rnn_gemm._gru_gemm_step_backward_kernel, dict(
                _pointers(("dout_ptr", "dh_ptr", "dhz_ptr", "ws_ptr", "dx_ptr", "dgh_ptr",
                           "next_ptr", "w_ptr"), dt), **backward_ints), dict(IEEE=ieee, **tiles)
            yield rnn_gemm._rnn_gemm_step_kernel, dict(
                _pointers(("src_ptr", "h0_ptr", "w_ptr", "x_ptr", "b_ptr", "h_ptr", "ws_ptr",
                           "out_ptr"), dt),
                **dict.fromkeys(("rows", "src_rows", "hidden", "x_stride"), "i32")), \
                dict(HAS_B=True, RELU=batch == 8, IEEE=ieee, **tiles)
            yield rnn_gemm._rnn_gemm_step_backward_kernel, dict(
                _pointers(("dout_ptr", "dh_ptr", "out_ptr", "dx_ptr", "next_ptr", "w_ptr"), dt),
                **dict.fromkeys(("rows", "next_rows", "carry_k", "hidden"), "i32")), \
                dict(RELU=batch == 8, IEEE=ieee, **tiles)
    for dt in ("fp32", "bf16", "fp16"):
        volumes = ("n", "D", "H", "W", "OD", "OH", "OW", "SD", "SH", "SW", "PD", "PH", "PW")
        for kernel in ((1, 3, 3), (3, 3, 3)):
            taps = dict(KD=kernel[0], KH=kernel[1], KW=kernel[2], BLOCK=pooling.BLOCK)
            yield pooling._max_pool3d_kernel, dict(
                _pointers(("x_ptr", "y_ptr"), dt), index_ptr="*i64",
                **dict.fromkeys(volumes + ("DD", "DH", "DW"), "i32")), taps
            for include_pad, has_divisor in ((True, False), (False, False), (False, True)):
                constants = dict(taps, INCLUDE_PAD=include_pad, HAS_DIVISOR=has_divisor)
                yield pooling._avg_pool3d_kernel, dict(
                    _pointers(("x_ptr", "y_ptr"), dt), divisor="fp32",
                    **dict.fromkeys(volumes, "i32")), constants
                yield pooling._avg_pool3d_backward_kernel, dict(
                    _pointers(("g_ptr", "dx_ptr"), dt), divisor="fp32",
                    **dict.fromkeys(volumes, "i32")), constants
    for dt in ("fp32", "bf16"):
        tables = dict(ih_ptr="*i64", wh_ptr="*fp32", iw_ptr="*i64", ww_ptr="*fp32",
                      **dict.fromkeys(("n", "H", "W", "OH", "OW", "TH", "TW"), "i32"))
        constants = dict(BLOCK=resample.BLOCK)
        yield resample._resample2d_kernel, dict(
            _pointers(("x_ptr", "y_ptr"), dt), **tables), constants
        yield resample._resample2d_backward_kernel, dict(
            g_ptr=f"*{dt}", dx_ptr="*fp32", **tables), constants
    scalars = dict.fromkeys(("lr", "beta1", "beta2", "eps", "weight_decay"), "fp32")
    for decay in (0, 1, 2):
        for amsgrad in (False, True):
            yield optimizers._adam_kernel, dict(table_ptr="*i64", blocks_ptr="*i64", **scalars), \
                dict(DECAY=decay, AMSGRAD=amsgrad, BLOCK=optimizers.BLOCK)
    scalars = dict.fromkeys(("lr", "momentum", "dampening", "weight_decay"), "fp32")
    for decay, momentum, nesterov in ((False, False, False), (True, True, False),
                                      (False, True, True)):
        yield optimizers._sgd_kernel, dict(table_ptr="*i64", blocks_ptr="*i64", **scalars), \
            dict(DECAY=decay, MOMENTUM=momentum, NESTEROV=nesterov, BLOCK=optimizers.BLOCK)

    scalars = dict.fromkeys(("lr", "alpha", "eps", "weight_decay", "momentum"), "fp32")
    for decay, centered, momentum in ((False, False, False), (True, True, True)):
        yield optimizers._rmsprop_kernel, dict(table_ptr="*i64", blocks_ptr="*i64", **scalars), \
            dict(DECAY=decay, CENTERED=centered, MOMENTUM=momentum, BLOCK=optimizers.BLOCK)
    for decay in (False, True):
        yield optimizers._adadelta_kernel, dict(table_ptr="*i64", blocks_ptr="*i64", lr="fp32",
                                               rho="fp32", eps="fp32", weight_decay="fp32"), \
            dict(DECAY=decay, BLOCK=optimizers.BLOCK)
        yield optimizers._adagrad_kernel, dict(table_ptr="*i64", blocks_ptr="*i64", eps="fp32",
                                              weight_decay="fp32"), \
            dict(DECAY=decay, BLOCK=optimizers.BLOCK)
    scalars = dict.fromkeys(("lr", "beta1", "beta2", "eps", "weight_decay"), "fp32")
    for decay, inf_norm in ((0, False), (1, False), (2, False), (1, True)):
        yield optimizers._adam_variant_kernel, dict(table_ptr="*i64", blocks_ptr="*i64",
                                                    **scalars), \
            dict(DECAY=decay, INF_NORM=inf_norm, BLOCK=optimizers.BLOCK)
    yield optimizers._sum_of_squares_kernel, dict(table_ptr="*i64", blocks_ptr="*i64",
                                                 out_ptr="*fp32"), dict(BLOCK=optimizers.BLOCK)
    for check in (False, True):
        yield optimizers._scale_kernel, dict(table_ptr="*i64", blocks_ptr="*i64",
                                            coef_ptr="*fp32", found_ptr="*fp32"), \
            dict(CHECK=check, BLOCK=optimizers.BLOCK)
    geometry = dict.fromkeys(("M", "OC", "K", "C", "D", "H", "W", "OD", "OH", "OW", "SD", "SH",
                              "SW", "PD", "PH", "PW", "DD", "DH", "DW", "KD", "KH", "KW", "G"),
                             "i32")
    for dt, ieee in (("fp32", True), ("fp32", False), ("bf16", False)):
        for channels in (16, 64, 256):
            block_m, block_n = conv.tiles(channels)
            yield conv._conv3d_kernel, dict(
                _pointers(("x_ptr", "w_ptr", "b_ptr", "y_ptr"), dt), **geometry), \
                dict(HAS_BIAS=channels == 64, IEEE=ieee, BLOCK_M=block_m, BLOCK_N=block_n,
                     BLOCK_K=conv.BLOCK_K)
            yield conv._conv3d_input_grad_kernel, dict(
                _pointers(("g_ptr", "w_ptr", "b_ptr", "dx_ptr"), dt), **geometry), \
                dict(HAS_BIAS=channels == 64, IEEE=ieee, BLOCK_M=block_m, BLOCK_N=block_n,
                     BLOCK_K=conv.BLOCK_K)
            yield conv._conv3d_weight_grad_kernel, dict(
                _pointers(("x_ptr", "g_ptr"), dt), dw_ptr="*fp32", **geometry,
                rows_per_split="i32"), \
                dict(IEEE=ieee, BLOCK_M=conv._GRAD_ROWS, BLOCK_N=block_n, BLOCK_K=conv.BLOCK_K)

    planes = dict.fromkeys(("C", "H", "W", "OH", "OW", "MULT", "SH", "SW", "PH", "PW", "DH", "DW",
                            "KH", "KW"), "i32")
    for dt in ("fp32", "bf16", "fp16"):
        for has_bias, block in ((True, 64), (False, 1024)):
            yield depthwise._depthwise_kernel, dict(
                _pointers(("x_ptr", "w_ptr", "b_ptr", "y_ptr"), dt), **planes), \
                dict(HAS_BIAS=has_bias, BLOCK=block)
            yield depthwise._depthwise_input_grad_kernel, dict(
                _pointers(("g_ptr", "w_ptr", "b_ptr", "dx_ptr"), dt), **planes), \
                dict(HAS_BIAS=has_bias, BLOCK=block)
        for taps in (16, 64):
            yield depthwise._depthwise_weight_grad_kernel, dict(
                _pointers(("x_ptr", "g_ptr"), dt), partial_ptr="*fp32", B="i32", chunk="i32",
                **planes), dict(TAPS=taps, BLOCK=max(16, 4096 // taps))
    dims = dict(C="i32", L="i32", PER_GROUP="i32")
    for dt in ("fp32", "bf16"):
        for affine in (False, True):
            yield group_norm._normalize_kernel, dict(
                _pointers(("x_ptr", "y_ptr"), dt), mean_ptr="*fp32", invstd_ptr="*fp32",
                w_ptr="*fp32", b_ptr="*fp32", n="i32", **dims), \
                dict(HAS_W=affine, HAS_B=affine, BLOCK=group_norm.BLOCK)
            yield group_norm._input_gradient_kernel, dict(
                _pointers(("g_ptr", "x_ptr", "gx_ptr"), dt), mean_ptr="*fp32",
                invstd_ptr="*fp32", w_ptr="*fp32", coef_ptr="*fp32", n="i32", **dims), \
                dict(HAS_W=affine, BLOCK=group_norm.BLOCK)
            yield group_norm._row_coefficients_kernel, dict(
                _pointers(("sums_ptr", "w_ptr", "invstd_ptr", "coef_ptr")), C="i32",
                PER_GROUP="i32", count="fp32"), dict(HAS_W=affine, BLOCK=16)
        yield group_norm._plane_sums_kernel, dict(
            _pointers(("g_ptr", "x_ptr"), dt), mean_ptr="*fp32", sums_ptr="*fp32", **dims), \
            dict(BLOCK=group_norm.BLOCK)
    sizes = dict.fromkeys(("channels", "lanes", "per_channel", "chunk"), "i32")
    for dt in ("fp32", "bf16"):
        yield batch_norm._statistics_kernel, dict(x_ptr=f"*{dt}", partial_ptr="*fp32",
                                                  **sizes), dict(BLOCK=batch_norm.BLOCK)
        yield batch_norm._gradient_sums_kernel, dict(
            _pointers(("g_ptr", "x_ptr", "mean_ptr"), dt), partial_ptr="*fp32", **sizes), \
            dict(BLOCK=batch_norm.BLOCK)
        for from_var, affine in ((False, True), (True, False)):
            yield batch_norm._normalize_kernel, dict(
                _pointers(("x_ptr", "y_ptr", "mean_ptr", "scale_ptr"), dt), w_ptr="*fp32",
                b_ptr="*fp32", n="i32", channels="i32", lanes="i32", eps="fp32"), \
                dict(FROM_VAR=from_var, HAS_W=affine, HAS_B=affine, BLOCK=batch_norm.BLOCK)
            yield batch_norm._input_gradient_kernel, dict(
                _pointers(("g_ptr", "x_ptr", "mean_ptr", "gx_ptr"), dt), coef_ptr="*fp32",
                n="i32", channels="i32", lanes="i32"), \
                dict(TRAINING=not from_var, BLOCK=batch_norm.BLOCK)
            yield batch_norm._gradient_finish_kernel, dict(
                _pointers(("partial_ptr", "coef_ptr", "gw_ptr", "gb_ptr")), invstd_ptr=f"*{dt}",
                w_ptr="*fp32", splits="i32", channels="i32", per_channel="i32", eps="fp32"), \
                dict(FROM_VAR=from_var, TRAINING=not from_var, HAS_W=affine, SPLITS=1024)
    for running in (False, True):
        yield batch_norm._statistics_finish_kernel, dict(
            _pointers(("partial_ptr", "mean_ptr", "invstd_ptr", "rm_ptr", "rv_ptr")),
            splits="i32", eps="fp32", momentum="fp32", unbias="fp32"), \
            dict(RUNNING=running, SPLITS=1 if running else 1024)


CASES = list(_cases())


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                    reason="the kernels are interpreted in this process")
@pytest.mark.parametrize("kernel, signature, constants", CASES,
                         ids=[f"{k.__name__}-{'-'.join(map(str, c.values()))}-"
                              f"{next(iter(s.values()))}" for k, s, c in CASES])
def test_kernel_compiles_for_sm90(kernel, signature, constants):
    signature = dict(signature, **dict.fromkeys(constants, "constexpr"))
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constants),
                              target=GPUTarget("cuda", 90, 32))
    assert "cubin" in compiled.asm
    # an H100/H200 block gets at most 227 KiB of shared memory: more fails only at launch
    assert compiled.metadata.shared <= 227 * 1024, compiled.metadata.shared
