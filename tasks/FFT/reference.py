"""Float64 oracle for FFT: X[k] = sum_n x[n] exp(-2 pi i k n / N), forward, unnormalised, natural
order, with x = input_real + i input_img."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input_real"], dtype=np.float64) + 1j * np.asarray(
        inputs["input_img"], dtype=np.float64
    )
    n = x.size
    spectrum = np.fft.fft(x)  # numpy: exp(-2 pi i k n / N), no scaling on the forward transform
    # Rounding noise of an FFT grows like sqrt(log2 N) * ||x||_2 per element (see task.toml).
    stages = max(n.bit_length() - 1, 1)
    scale = np.sqrt(stages) * np.sqrt(np.sum(x.real**2 + x.imag**2))
    mag = np.full(n, scale)
    return {"output_real": (spectrum.real.copy(), mag), "output_img": (spectrum.imag.copy(), mag)}
