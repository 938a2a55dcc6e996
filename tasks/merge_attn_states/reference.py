"""Float64 oracle for merge_attn_states: per (token t, head h), weights from the two
log-sum-exps (head-major [H][T], +-inf read as -FLT_MAX) merge the token-major V rows
[T][H][S], and LSE_out = log(e^pa + e^pb) taken around the larger one."""

import numpy as np

FLT_MAX = float(np.finfo(np.float32).max)


def oracle(inputs, params, variant):
    t, h, s = int(params["T"]), int(params["H"]), int(params["S"])
    va = np.asarray(inputs["V_a"], dtype=np.float64).reshape(t, h, s)
    vb = np.asarray(inputs["V_b"], dtype=np.float64).reshape(t, h, s)
    pa = np.asarray(inputs["lse_a"], dtype=np.float64).reshape(h, t)
    pb = np.asarray(inputs["lse_b"], dtype=np.float64).reshape(h, t)
    pa = np.where(np.isinf(pa), -FLT_MAX, pa)
    pb = np.where(np.isinf(pb), -FLT_MAX, pb)
    m = np.maximum(pa, pb)
    ea, eb = np.exp(pa - m), np.exp(pb - m)
    total = ea + eb
    # weights per (h, t), moved to the V layout as [T][H][1]
    wa = (ea / total).T[:, :, None]
    wb = (eb / total).T[:, :, None]
    v_out = va * wa + vb * wb
    v_mag = np.abs(va) * wa + np.abs(vb) * wb
    log_total = np.log(total)
    lse = log_total + m
    lse_mag = np.abs(log_total) + np.abs(m)
    if variant == "bf16":
        # -FLT_MAX (both inputs infinite) overflows to -inf when rounded to bf16
        lse = np.where(lse <= -FLT_MAX, -np.inf, lse)
    return {"V_out": (v_out, v_mag), "LSE_out": (lse, lse_mag)}
