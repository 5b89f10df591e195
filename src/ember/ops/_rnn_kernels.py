"""The time loops of RNN_TANH, RNN_RELU, LSTM and GRU layers on backend arrays.

Every kernel works on *packed* rows: ``x`` holds the input projections of all steps, one row
per (step, sequence), and ``steps`` lists ``(offset, batch)`` in processing order; step
``k`` updates the first ``batch`` rows of the state (sequences are sorted by decreasing
length, so rows past ``batch`` are finished, or for the reverse direction not started yet,
and keep their state). A forward returns ``(output, h_n, c_n, workspace)``: the workspace
keeps, per packed row, what the backward needs (gate activations, previous states), so the
backward runs without recomputing a GEMM. A backward returns the gradients of
``(x, hx, w_hh, cx, b_hh, w_hr)`` (None where there is no such input).
"""

from ember.backend import device_kernel, device_of
from ember.backend.gemm_layout import reused_operand
from ember.ops.linalg import matrix_product

_SIGMOID_TANH = {}      # (xp, device, dtype, hidden, tanh gate, gates) -> rows; see _activate


def _gate_rows(xp, device, dtype, hidden, tanh_gate, gates):
    """Per-column rows (a, b, c) so that ``b / (1 + exp(a * v)) + c`` is sigmoid(v) on
    sigmoid columns (a, b, c = -1, 1, 0) and tanh(v) = 2 sigmoid(2v) - 1 on column
    ``tanh_gate`` (a, b, c = -2, 2, -1); cached per device, as each GPU needs its own."""
    key = (xp, device, dtype, hidden, tanh_gate, gates)
    hit = _SIGMOID_TANH.get(key)
    if hit is None:
        rows = [xp.full(gates * hidden, v, dtype=dtype) for v in (-1, 1, 0)]
        if tanh_gate is not None:
            for row, v in zip(rows, (-2, 2, -1)):
                row[tanh_gate * hidden:(tanh_gate + 1) * hidden] = v
        hit = _SIGMOID_TANH[key] = tuple(rows)
    return hit


def _activate(xp, g, rows):
    """Fused gate nonlinearities, in place, through one exp over all gates (NumPy's exp
    takes half the time of its tanh; in-range to +-inf: exp overflows to sigmoid 0)."""
    a, b, c = rows
    g *= a
    xp.exp(g, out=g)
    g += 1
    xp.divide(b, g, out=g)
    g += c
    return g


def _state(xp, h):
    return xp.array(h, copy=True, order="C")


def _step_weight(xp, w, steps):
    """``w.T`` for the per-step products ``h @ w.T``: a row-major copy when several steps use
    it (OpenBLAS multiplies 20x256 by a transposed 1024x256 view some 1.3x slower than by a
    row-major 256x1024 matrix; the copy costs less than one such product)."""
    return reused_operand(xp, w.T) if len(steps) > 1 else w.T


# --- RNN_TANH / RNN_RELU ----------------------------------------------------------------------

def rnn_forward(xp, x, hx, w_hh, b_hh, steps, relu):
    """Elman RNN: h' = act(x + h W_hh^T + b_hh); workspace: the previous state of each row."""
    n, hidden = x.shape[0], hx.shape[1]
    out = xp.empty((n, hidden), dtype=x.dtype)
    ws = xp.empty((n, hidden), dtype=x.dtype)
    h = _state(xp, hx)
    wt = w_hh.T
    fused = device_kernel(x, "rnn_steps")           # a kernel a step
    if fused is not None and fused(x, b_hh, h, ws, out, wt, steps, hidden, relu):
        return out, h, None, ws
    wt = _step_weight(xp, w_hh, steps)
    for o, bs in steps:
        hp = h[:bs]
        ws[o:o + bs] = hp
        a = matrix_product(xp, hp, wt)
        a += x[o:o + bs]
        if b_hh is not None:
            a += b_hh
        if relu:
            xp.maximum(a, 0, out=a)
        else:
            xp.tanh(a, out=a)
        out[o:o + bs] = a
        h[:bs] = a
    return out, h, None, ws


def rnn_backward(xp, dout, dh_n, out, ws, w_hh, b_hh, steps, relu):
    """BPTT through ``rnn_forward``."""
    dx = xp.empty_like(out)
    carry = _state(xp, dh_n)
    fused = device_kernel(dx, "rnn_steps_backward")     # a kernel a step
    if fused is None or not fused(dout, carry, out, dx, w_hh, steps, out.shape[1], relu):
        _rnn_steps_backward(xp, dout, carry, out, dx, w_hh, steps, relu)
    dw = matrix_product(xp, dx.T, ws)
    db = dx.sum(0) if b_hh is not None else None
    return dx, carry, dw, None, db, None


def _rnn_steps_backward(xp, dout, carry, out, dx, w_hh, steps, relu):
    """The pre-activations' gradients ``dx`` of every step, last first; ``carry`` ends as
    the initial state's gradient."""
    for o, bs in reversed(steps):
        dh = dout[o:o + bs] + carry[:bs]
        h = out[o:o + bs]
        if relu:
            dh *= h > 0
        else:
            dh *= 1 - h * h
        dx[o:o + bs] = dh
        carry[:bs] = matrix_product(xp, dh, w_hh)


# --- LSTM -------------------------------------------------------------------------------------

def _lstm_columns(hidden, proj):
    """Workspace columns: activations i,f,g,o | c | tanh(c) | c_prev | h_prev [| h before
    the projection]."""
    a = 4 * hidden
    cols = {"act": (0, a), "c": (a, a + hidden), "tc": (a + hidden, a + 2 * hidden),
            "cp": (a + 2 * hidden, a + 3 * hidden),
            "hp": (a + 3 * hidden, a + 3 * hidden + proj)}
    end = a + 3 * hidden + proj
    if proj != hidden:
        cols["hpre"] = (end, end + hidden)
        end += hidden
    return cols, end


def lstm_forward(xp, x, hx, cx, w_hh, b_hh, w_hr, steps):
    """LSTM (gates i, f, g, o), optionally projecting h with ``w_hr``."""
    n, hidden, proj = x.shape[0], cx.shape[1], hx.shape[1]
    cols, width = _lstm_columns(hidden, hidden if w_hr is None else proj)
    ws = xp.empty((n, width), dtype=x.dtype)
    act, cc, tcc, cpc, hpc = (ws[:, a:b] for a, b in
                              (cols[k] for k in ("act", "c", "tc", "cp", "hp")))
    hpre = ws[:, slice(*cols["hpre"])] if w_hr is not None else None
    out = xp.empty((n, proj), dtype=x.dtype)
    h, c = _state(xp, hx), _state(xp, cx)
    wt = w_hh.T
    fused = device_kernel(x, "lstm_steps") if w_hr is None else None   # a kernel a step
    if fused is not None and fused(x, b_hh, h, c, ws, out, wt, steps, hidden):
        return out, h, c, ws
    wt = _step_weight(xp, w_hh, steps)
    wrt = None if w_hr is None else _step_weight(xp, w_hr, steps)
    rows = _gate_rows(xp, device_of(x), x.dtype, hidden, 2, 4)
    h2 = 2 * hidden
    for o, bs in steps:
        hp, cp = h[:bs], c[:bs]
        g = matrix_product(xp, hp, wt)
        hpc[o:o + bs] = hp
        cpc[o:o + bs] = cp
        g += x[o:o + bs]
        if b_hh is not None:
            g += b_hh
        _activate(xp, g, rows)
        act[o:o + bs] = g
        cn = g[:, hidden:h2] * cp
        cn += g[:, :hidden] * g[:, h2:h2 + hidden]
        cc[o:o + bs] = cn
        tc = xp.tanh(cn)
        tcc[o:o + bs] = tc
        hn = g[:, h2 + hidden:] * tc
        if w_hr is not None:
            hpre[o:o + bs] = hn
            hn = matrix_product(xp, hn, wrt)
        out[o:o + bs] = hn
        h[:bs] = hn
        c[:bs] = cn
    return out, h, c, ws


def lstm_backward(xp, dout, dh_n, dc_n, ws, w_hh, b_hh, w_hr, steps):
    """BPTT through ``lstm_forward``."""
    hidden = dc_n.shape[1]
    proj = dh_n.shape[1]
    cols, _ = _lstm_columns(hidden, hidden if w_hr is None else proj)
    n = ws.shape[0]
    dg = xp.empty((n, 4 * hidden), dtype=ws.dtype)
    dr = xp.empty((n, proj), dtype=ws.dtype) if w_hr is not None else None
    dh_carry, dc_carry = _state(xp, dh_n), _state(xp, dc_n)
    fused = device_kernel(ws, "lstm_steps_backward") if w_hr is None else None  # a kernel a step
    if fused is None or not fused(dout, dh_carry, dc_carry, ws, dg, w_hh, steps, hidden):
        _lstm_steps_backward(xp, dout, dh_carry, dc_carry, ws, dg, dr, w_hh, w_hr, steps,
                             cols, hidden)
    dw_hh = matrix_product(xp, dg.T, ws[:, slice(*cols["hp"])])
    db = dg.sum(0) if b_hh is not None else None
    dw_hr = matrix_product(xp, dr.T, ws[:, slice(*cols["hpre"])]) if w_hr is not None else None
    return dg, dh_carry, dw_hh, dc_carry, db, dw_hr


def _lstm_factors(xp, ws, dg, cols, hidden):
    """Fill ``dg`` with what each step's gate gradients multiply, computed for all rows at
    once (i,f,g by dc: g i', c_prev f', i g'; o by dh: tanh(c) o'), and return what dh
    multiplies into dc (o tanh'(c)): the loop over steps is left with the carried products."""
    act, tc, cp = (ws[:, slice(*cols[k])] for k in ("act", "tc", "cp"))
    h1, h2, h3 = hidden, 2 * hidden, 3 * hidden
    i, f, g, og = act[:, :h1], act[:, h1:h2], act[:, h2:h3], act[:, h3:]
    xp.multiply(g, i - i * i, out=dg[:, :h1])
    xp.multiply(cp, f - f * f, out=dg[:, h1:h2])
    xp.multiply(i, 1 - g * g, out=dg[:, h2:h3])
    xp.multiply(tc, og - og * og, out=dg[:, h3:])
    return og * (1 - tc * tc)


def _lstm_steps_backward(xp, dout, dh_carry, dc_carry, ws, dg, dr, w_hh, w_hr, steps, cols,
                         hidden):
    """The gate gradients ``dg`` (and ``dr``, the projection's) of every step, last first;
    the carried ``dh_carry`` and ``dc_carry`` end as the initial states' gradients."""
    to_dc = _lstm_factors(xp, ws, dg, cols, hidden)
    forget = ws[:, slice(*cols["act"])][:, hidden:2 * hidden]
    by_gate = dg.reshape(dg.shape[0], 4, hidden)
    for o, bs in reversed(steps):
        dh = dout[o:o + bs] + dh_carry[:bs]
        if w_hr is not None:
            dr[o:o + bs] = dh
            dh = matrix_product(xp, dh, w_hr)
        dc = dh * to_dc[o:o + bs]
        dc += dc_carry[:bs]
        gates = by_gate[o:o + bs]
        gates[:, :3] *= dc[:, None]
        gates[:, 3] *= dh
        xp.multiply(dc, forget[o:o + bs], out=dc_carry[:bs])
        dh_carry[:bs] = matrix_product(xp, dg[o:o + bs], w_hh)


# --- GRU --------------------------------------------------------------------------------------

def gru_forward(xp, x, hx, w_hh, b_hh, steps):
    """GRU (gates r, z, n): n = tanh(x_n + r * (h W_hn^T + b_hn)), h' = n + z * (h - n).

    Workspace columns: r, z | n | h W_hn^T + b_hn | h_prev."""
    n_rows, hidden = x.shape[0], hx.shape[1]
    h2 = 2 * hidden
    ws = xp.empty((n_rows, 5 * hidden), dtype=x.dtype)
    out = xp.empty((n_rows, hidden), dtype=x.dtype)
    h = _state(xp, hx)
    wt = w_hh.T
    fused = device_kernel(x, "gru_steps")           # a kernel a step
    if fused is not None and fused(x, b_hh, h, ws, out, wt, steps, hidden):
        return out, h, None, ws
    wt = _step_weight(xp, w_hh, steps)
    rows = _gate_rows(xp, device_of(x), x.dtype, hidden, None, 2)
    for o, bs in steps:
        hp = h[:bs]
        ws[o:o + bs, 4 * hidden:] = hp
        gh = matrix_product(xp, hp, wt)
        if b_hh is not None:
            gh += b_hh
        gx = x[o:o + bs]
        rz = gh[:, :h2]
        rz += gx[:, :h2]
        _activate(xp, rz, rows)
        hn = gh[:, h2:]
        nn = rz[:, :hidden] * hn
        nn += gx[:, h2:]
        xp.tanh(nn, out=nn)
        ws[o:o + bs, :h2] = rz
        ws[o:o + bs, h2:3 * hidden] = nn
        ws[o:o + bs, 3 * hidden:4 * hidden] = hn
        hnew = hp - nn
        hnew *= rz[:, hidden:]
        hnew += nn
        out[o:o + bs] = hnew
        h[:bs] = hnew
    return out, h, None, ws


def gru_backward(xp, dout, dh_n, ws, w_hh, b_hh, steps):
    """BPTT through ``gru_forward``."""
    hidden = dh_n.shape[1]
    dx = xp.empty((ws.shape[0], 3 * hidden), dtype=ws.dtype)
    dgh = xp.empty((ws.shape[0], 3 * hidden), dtype=ws.dtype)
    carry = _state(xp, dh_n)
    fused = device_kernel(ws, "gru_steps_backward")   # a kernel a step
    if fused is None or not fused(dout, carry, ws, dx, dgh, w_hh, steps, hidden):
        _gru_steps_backward(xp, dout, carry, ws, dx, dgh, w_hh, steps, hidden)
    dw = matrix_product(xp, dgh.T, ws[:, 4 * hidden:])
    db = dgh.sum(0) if b_hh is not None else None
    return dx, carry, dw, None, db, None


def _gru_steps_backward(xp, dout, carry, ws, dx, dgh, w_hh, steps, hidden):
    """The input projections' gradients ``dx`` and the recurrent products' ``dgh`` of every
    step, last first; ``carry`` ends as the initial state's gradient."""
    h2, h3 = 2 * hidden, 3 * hidden
    for o, bs in reversed(steps):
        w = ws[o:o + bs]
        r, z, nn, hn, hp = (w[:, :hidden], w[:, hidden:h2], w[:, h2:h3], w[:, h3:4 * hidden],
                            w[:, 4 * hidden:])
        dh = dout[o:o + bs] + carry[:bs]
        dn = dh * (1 - z)
        dn *= 1 - nn * nn
        d = dx[o:o + bs]
        xp.multiply(dh * (hp - nn), z - z * z, out=d[:, hidden:h2])
        xp.multiply(dn * hn, r - r * r, out=d[:, :hidden])
        d[:, h2:] = dn
        e = dgh[o:o + bs]
        e[:, :h2] = d[:, :h2]
        xp.multiply(dn, r, out=e[:, h2:])
        dh *= z
        dh += matrix_product(xp, e, w_hh)
        carry[:bs] = dh
