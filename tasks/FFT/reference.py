"""Float64 oracle for FFT: X[k] = sum_n x[n] exp(-2 pi i k n / N), forward, unnormalised, natural
order, with x = input_real + i input_img.

Large power-of-two N are transformed on all cores by the four-step method (N = N1 N2: N2
transforms of length N1, twiddles exp(-2 pi i j2 k1 / N), N1 transforms of length N2), each
batch in threads (numpy's FFT releases the GIL); smaller N by one numpy FFT."""

import numpy as np

from cudamaster.parallel import over_rows

FOUR_STEP_MIN = 1 << 20


def fft(x: np.ndarray) -> np.ndarray:
    """The forward DFT of a complex vector (numpy's sign convention, no scaling)."""
    n = x.size
    if n < FOUR_STEP_MIN or n & (n - 1):
        return np.fft.fft(x)
    n1 = 1 << ((n.bit_length() - 1) // 2)
    n2 = n // n1
    a = x.reshape(n1, n2)  # a[j1, j2] = x[j1 N2 + j2]
    b = np.empty((n2, n1), dtype=complex)  # b[j2, k1]

    def columns(lo: int, hi: int) -> None:  # j2 in lo..hi-1: length-N1 transforms, twiddled
        part = np.fft.fft(a[:, lo:hi].T, axis=1)
        turns = (np.arange(lo, hi)[:, None] * np.arange(n1)[None, :]) % n  # exact in int64
        part *= np.exp(-2j * np.pi * turns / n)
        b[lo:hi] = part

    out = np.empty((n2, n1), dtype=complex)  # X[k1 + N1 k2] = out[k2, k1]

    def rows(lo: int, hi: int) -> None:  # k1 in lo..hi-1: length-N2 transforms
        out[:, lo:hi] = np.fft.fft(b[:, lo:hi], axis=0)

    over_rows(0, n2, n1, columns)
    over_rows(0, n1, n2, rows)
    return out.reshape(-1)


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input_real"], dtype=np.float64) + 1j * np.asarray(
        inputs["input_img"], dtype=np.float64
    )
    n = x.size
    spectrum = fft(x)  # numpy's convention: exp(-2 pi i k n / N), no scaling
    # Rounding noise of an FFT grows like sqrt(log2 N) * ||x||_2 per element (see task.toml).
    stages = max(n.bit_length() - 1, 1)
    scale = np.sqrt(stages) * np.sqrt(np.sum(x.real**2 + x.imag**2))
    mag = np.full(n, scale)
    return {"output_real": (spectrum.real.copy(), mag), "output_img": (spectrum.imag.copy(), mag)}
