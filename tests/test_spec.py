"""Validation of the model specification: bad input gives a clear ValueError."""

import numpy as np
import pytest

from attnphase.spec.parse import parse_matrix, parse_range
from attnphase.spec.problem import ModelSpec, default_A, default_positions


def test_defaults_are_reference_case():
    s = ModelSpec()
    assert s.A == ((0.6, 0.4), (0.4, 0.6))
    assert s.positions == ((1.0, -1.0), (-1.0, 1.0))
    np.testing.assert_allclose(s.C_array, 0.25 * np.eye(2))
    assert s.uncorrelated


@pytest.mark.parametrize("L", [2, 3, 5])
def test_default_A_and_positions_are_valid(L):
    A = np.asarray(default_A(L))
    np.testing.assert_allclose(A.sum(1), 1.0)
    G = np.asarray(default_positions(L))
    np.testing.assert_allclose(np.diag(G), 1.0)
    np.testing.assert_allclose(G.sum(1), 0.0, atol=1e-12)
    assert np.linalg.eigvalsh(G).min() > -1e-12


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"omega": 1.5}, "omega"),
        ({"omega": -0.1}, "omega"),
        ({"sigma": 0.0}, "sigma"),
        ({"lam": -1.0}, "lam"),
        ({"A": ((0.5, 0.5),)}, "A must be 2x2"),
        ({"A": ((1.2, -0.2), (0.5, 0.5))}, "non-negative"),
        ({"A": ((0.5, 0.4), (0.5, 0.5))}, "row-stochastic"),
        ({"omega": "abc"}, "number"),
        ({"variant": "nope"}, "variant"),
        ({"L": 1}, "L must be"),
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ModelSpec(**kwargs)


def test_parse_matrix_and_range():
    assert parse_matrix("0.3,0.7;0.8,0.2") == ((0.3, 0.7), (0.8, 0.2))
    with pytest.raises(ValueError):
        parse_matrix("0.3,x;1,0")
    with pytest.raises(ValueError):
        parse_matrix("1,0;1")
    assert parse_range("0:1:3") == (0.0, 0.5, 1.0)
    assert parse_range("0.1,0.2") == (0.1, 0.2)
    with pytest.raises(ValueError):
        parse_range("0:1:0")
    with pytest.raises(ValueError):
        parse_range("a:b")
