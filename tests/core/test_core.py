import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shuffledp.core import Estimate, PrivacyStatement, ValidationError, as_generator, round_up
from shuffledp.core.validation import (
    check_delta,
    check_domain_size,
    check_epsilon,
    check_int_values,
    check_order,
    check_real_values,
)


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_round_up_never_smaller(x):
    assert round_up(x) > x


def test_privacy_statement_validation():
    s = PrivacyStatement(1.0, 1e-6, "shuffle")
    assert "shuffle" in str(s) and not s.pure
    assert PrivacyStatement.from_dict(s.to_dict()) == s
    for kw in [dict(eps=-1), dict(eps=float("nan")), dict(eps=1, delta=1.0), dict(eps=1, model="x"),
               dict(eps=1, neighbouring="x"), dict(eps=1, gamma=0.0)]:
        with pytest.raises(ValidationError):
            PrivacyStatement(**kw)


def test_estimate_ci():
    e = Estimate(np.array([0.5, 0.1]), np.array([0.1, 0.0]), 100, PrivacyStatement(1.0, 0, "local"))
    lo, hi = e.ci(0.95)
    assert lo[0] == pytest.approx(0.5 - 1.959964 * 0.1, rel=1e-6)
    assert hi[1] == lo[1] == 0.1
    np.testing.assert_allclose(e.counts(), [50, 10])
    with pytest.raises(ValidationError):
        e.ci(1.0)


@pytest.mark.parametrize("fn,bad", [(check_epsilon, 0), (check_epsilon, -1), (check_epsilon, math.inf),
                                    (check_epsilon, "1"), (check_epsilon, True),
                                    (check_delta, 0), (check_delta, 1), (check_delta, float("nan")),
                                    (check_domain_size, 1), (check_domain_size, 2.0), (check_order, 1.0)])
def test_scalar_checks(fn, bad):
    with pytest.raises(ValidationError) as ei:
        fn(bad)
    assert ei.value.parameter is not None


def test_error_names_parameter_and_range():
    with pytest.raises(ValidationError, match=r"epsilon must be a finite number > 0, got -2"):
        check_epsilon(-2)
    with pytest.raises(ValidationError, match=r"values must be integers in \[0, 5\), found 7"):
        check_int_values([1, 7], 5)


def test_value_checks():
    np.testing.assert_array_equal(check_int_values([0, 4], 5), [0, 4])
    assert check_int_values(3, 5).shape == (1,)
    for bad in ([0.0, 1.0], [[1]], ["a"], [True]):
        with pytest.raises(ValidationError):
            check_int_values(bad, 5)
    assert check_real_values([-1, 1]).dtype == np.float64
    for bad in ([np.nan], [1.5], [[0.0]], ["x"]):
        with pytest.raises(ValidationError):
            check_real_values(bad)


def test_rng_policy():
    g = as_generator(3)
    assert isinstance(g, np.random.Generator)
    assert as_generator(3).random() == as_generator(3).random()
    with pytest.raises(ValidationError):
        as_generator(3, production=True)
    with pytest.raises(ValidationError):
        as_generator(np.random.default_rng(1), production=True)
    a, b = as_generator(None, production=True), as_generator(None, production=True)
    assert a.random() != b.random()


# ------------------------------------------------------------------ printed statements never understate
import re  # noqa: E402
from decimal import Decimal  # noqa: E402


def _shown(statement: PrivacyStatement) -> tuple[str, str]:
    m = re.match(r"\(([^,]+), ([^)]+)\)-DP", str(statement))
    assert m, str(statement)
    return m.group(1), m.group(2)


def test_privacy_statement_str_rounds_eps_and_delta_up():
    # nearest rounding would print 1.23456 / 1.23e-06, both below the real values
    eps_txt, delta_txt = _shown(PrivacyStatement(1.2345649, 1.2341e-6, "shuffle"))
    assert eps_txt == "1.23457" and delta_txt == "1.24e-06"
    # nearest rounding would print "1" for an eps just above 1
    assert _shown(PrivacyStatement(1.0000004, 0.0))[0] == "1.00001"
    # values that print exactly (or parse back to themselves) are unchanged
    assert _shown(PrivacyStatement(1.0, 1e-6)) == ("1", "1e-06")
    assert _shown(PrivacyStatement(0.1, 0.0)) == ("0.1", "0")
    assert _shown(PrivacyStatement(2.5, 0.0))[0] == "2.5"


@given(eps=st.floats(min_value=1e-12, max_value=1e12), delta=st.floats(min_value=1e-300, max_value=0.999))
def test_privacy_statement_str_never_understates(eps, delta):
    eps_txt, delta_txt = _shown(PrivacyStatement(eps, delta, "central"))
    assert float(eps_txt) >= eps and float(delta_txt) >= delta
    # and it is at most one unit of the last shown digit above (rounded up, not inflated)
    for txt, x, sig in ((eps_txt, eps, 6), (delta_txt, delta, 3)):
        exp = Decimal(x).adjusted()
        assert Decimal(txt) - Decimal(x) <= Decimal(10) ** (exp - sig + 1) * Decimal("1.000001")
