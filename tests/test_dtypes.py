import numpy as np

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits


def test_bf16_round_to_nearest_even():
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0)
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 3.4e38], dtype=np.float32)
    back = bf16_bits_to_f32(f32_to_bf16_bits(x))
    assert back.tolist()[:4] == [1.0, 1.0, 1 + 2**-6, -2.5]
    assert np.isinf(back[4])  # rounds past the largest bf16


def test_bf16_nan_stays_nan_and_roundtrip_is_exact():
    bits = np.arange(0, 0x7F80, 7, dtype=np.uint16)
    assert np.array_equal(f32_to_bf16_bits(bf16_bits_to_f32(bits)), bits)
    assert np.isnan(bf16_bits_to_f32(f32_to_bf16_bits(np.array([np.nan], np.float32))))[0]
