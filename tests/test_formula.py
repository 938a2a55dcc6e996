import pytest

from cudamaster import formula
from cudamaster.errors import UserError


def test_integer_products_never_wrap():
    # spmm_csr at rows = 2^18: nnz*K = 5368709*4096 overflows int32 in the original harness
    assert formula.evaluate("nnz*K", {"nnz": 5368709, "K": 4096}) == 21990232064


def test_shapes_and_helpers():
    assert formula.evaluate_shape("M, K", {"M": 3, "K": 5}) == (3, 5)
    assert formula.evaluate("N*ilog2(N)", {"N": 1024}) == 10240
    assert formula.evaluate("ilog2(P) + popcount(P) - 1", {"P": 11}) == 5


def test_unknown_name_is_a_user_error():
    with pytest.raises(UserError, match="unknown name 'Q'"):
        formula.evaluate("Q*2", {"N": 1})


def test_no_arbitrary_code():
    with pytest.raises(UserError):
        formula.evaluate("__import__('os').system('true')", {})
