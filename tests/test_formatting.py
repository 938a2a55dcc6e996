"""Ratios and fractions as people and the model read them: small ones keep their digits."""

from cudamaster.formatting import percent, ratio


def test_a_kernel_far_from_the_speed_of_light_does_not_read_as_zero():
    assert percent(0.00036) == "0.036%" and percent(0.0012) == "0.12%"
    assert percent(0.528) == "52.8%" and percent(0.01) == "1.0%" and percent(0.0) == "0.0%"
    assert percent(None) == "-"


def test_a_kernel_far_slower_than_the_library_does_not_read_as_zero_times():
    assert ratio(0.00386) == "0.0039x" and ratio(0.0115) == "0.011x"
    assert ratio(0.34) == "0.34x" and ratio(2.284) == "2.28x" and ratio(0.999) == "1.00x"
    assert ratio(None) == "-"
