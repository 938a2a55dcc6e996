"""Float64 oracle for rope: rotate each adjacent pair (2p, 2p+1) of row m by the angle
phi = fp32(m * theta_p), theta_p = fp32(base ** fp32(-2p / D)).

The angle is formed exactly as the semantics say, with fp32 rounding at each step (the exponent
quotient, powf correctly rounded, the product m*theta); only cos/sin and the rotation are
float64. The fp32 angle is part of the operator: at phi ~ 1000 its own rounding is ~3e-5 rad,
far more than any float64-vs-fp32 difference after it."""

import numpy as np


def angles(m_count, d, base):
    """phi[m, p] as float64 values of the fp32 angles."""
    p = np.arange(d // 2, dtype=np.float32)
    expo = (np.float32(-2.0) * p) / np.float32(d)  # fp32 product and quotient
    theta = np.power(float(np.float32(base)), expo.astype(np.float64)).astype(np.float32)
    m = np.arange(m_count, dtype=np.float32)
    phi = m[:, None] * theta[None, :]  # fp32 * fp32, rounded once to fp32
    return phi.astype(np.float64)


def oracle(inputs, params, variant):
    m_count, d = int(params["M"]), int(params["D"])
    x = np.asarray(inputs["input"], dtype=np.float64).reshape(m_count, d)
    phi = angles(m_count, d, inputs["base"])
    c, s = np.cos(phi), np.sin(phi)
    x0, x1 = x[:, 0::2], x[:, 1::2]
    ref = np.empty_like(x)
    ref[:, 0::2] = x0 * c - x1 * s
    ref[:, 1::2] = x0 * s + x1 * c
    # mag: the pair's size times (1 + |phi|): an fp32 angle is only known to a few ulp of phi
    # (powf's error, another exponent formulation), and the rotation to a few ulp of the pair
    pair = (np.abs(x0) + np.abs(x1)) * (1.0 + np.abs(phi))
    mag = np.repeat(pair, 2, axis=1)
    return {"output": (ref, mag)}
