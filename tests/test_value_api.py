"""The trainable value gain through the library's and the command line's entry points
(docs/model.md (6.5)): ``value="gain"`` with ``value_gain`` unset is solved at the optimal gain
of :func:`attnphase.theory.value.solve_gain`; set, at that gain held fixed."""

from __future__ import annotations

import json

import pytest

import attnphase as ap
from attnphase.cli import main
from attnphase.spec.problem import ModelSpec
from attnphase.theory.fixed_point import SolverSettings, make_saddle
from attnphase.theory.value import GainPoint, solve_gain

#: a coarse rule of order 7 and one refinement at order 7: a cheap setting with the gain's error estimate
CHEAP = SolverSettings.preset("fast", order=7, refine_order=7)
ALPHA = 1.25


@pytest.fixture(scope="module")
def optimal():
    g = solve_gain(ModelSpec(value="gain"), ALPHA, "semantic", CHEAP)
    assert g.success, g.message
    return g


def test_solve_returns_the_optimal_gain(optimal):
    res = ap.solve(ALPHA, branch="semantic", value="gain", settings=CHEAP)
    assert res.success, res.message
    r = res.branches["semantic"]
    assert r.gain == optimal.gain and r.gain_error == optimal.gain_error
    assert r.train_loss == optimal.train_loss
    assert abs(r.gain - 1.0) > 10 * r.gain_error  # the optimum is not the identity's gain
    assert res.to_dict()["branches"]["semantic"]["gain"] == r.gain
    assert "optimal gain" in res.message
    # the identity value's record has no gain
    coarse = SolverSettings.preset("fast", refine_order=0)
    assert "gain" not in ap.solve(ALPHA, branch="semantic", settings=coarse).to_dict()["branches"]["semantic"]


def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_solve_json_gives_the_optimal_gain(capsys, optimal):
    rc, out, _ = _run(capsys, ["solve", "--alpha", str(ALPHA), "--branch", "semantic", "--value", "gain",
                               "--preset", "fast", "--order", "7", "--refine-order", "7", "--json"])
    assert rc == 0
    rec = json.loads(out)["branches"]["semantic"]
    assert rec["gain"] == optimal.gain and rec["gain_error"] == optimal.gain_error
    # a fixed gain away from the optimum: held there, at a higher training error
    rc, out, _ = _run(capsys, ["solve", "--alpha", str(ALPHA), "--branch", "semantic", "--value", "gain",
                               "--value-gain", "1.1", "--preset", "fast", "--order", "7", "--refine-order", "7"])
    assert rc == 0
    assert "value gain: semantic v = 1.100000 (fixed)" in out
    train = float(out.splitlines()[2].split()[5])
    assert train > optimal.train_loss


def test_failed_gain_search_is_no_success(monkeypatch):
    """A gain search that fails after it started: ``success`` false, the reason in the message."""
    import attnphase.theory.value as tv

    def failing(spec, alpha, branch, settings=None, **kw):
        return GainPoint(branch, alpha, False, "the coarse gain search did not converge", history=((1.0, 1.1),))

    monkeypatch.setattr(tv, "solve_gain", failing)
    res = ap.solve(ALPHA, branch="semantic", value="gain", settings=CHEAP)
    assert not res.success
    assert res.branches["semantic"] is None
    assert "the gain search failed: the coarse gain search did not converge" in res.message


def test_transition_at_the_optimal_gain():
    """``alpha_c`` with each branch at its own optimal gain (the order-6 coarse rule, a bracketing
    grid of two points): located inside the bracket, the gains those of :func:`solve_gain`."""
    st = SolverSettings.preset("fast", order=6, refine_order=0)
    tr = ap.transition(alphas=[1.2, 1.3], value="gain", settings=st)
    assert tr.success, tr.message
    assert 1.2 < tr.alpha_c < 1.3
    assert tr.alpha_l is None and tr.gains is not None
    a = tr.gains["at_alpha"]
    for b in ("semantic", "positional"):
        g = solve_gain(ModelSpec(value="gain"), a, b, st)
        assert tr.gains[b]["gain"] == g.gain != 1.0
    assert tr.to_dict()["gains"]["at_alpha"] == a


@pytest.mark.parametrize("argv, message", [
    (["solve", "--alpha", "1", "--value-gain", "1.1"], "value_gain is the gain of value = gain; got value = identity"),
    (["solve", "--alpha", "1", "--value", "lowrank"], "the theory covers value = identity and gain only"),
    (["solve", "--alpha", "1", "--value", "gain", "--value-gain", "-1"], "value_gain must be > 0"),
    (["transition", "--value", "gain", "--replicas", "2"], "use replicas 1"),
    (["transition", "--value", "full"], "the theory covers value = identity and gain only"),
    (["curves", "--value", "gain"], "give --value-gain"),
])
def test_bad_value_combinations_refused(capsys, argv, message):
    rc, out, err = _run(capsys, argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_fixed_point_solvers_refuse_the_unset_gain():
    """Below the entry points the saddle-point equations need the gain: the unset one is refused."""
    with pytest.raises(ValueError, match="give value_gain to hold the gain fixed"):
        make_saddle(ModelSpec(value="gain"), ALPHA, CHEAP)
    assert ModelSpec(value="gain").gain_start == 1.0 and ModelSpec(value="gain").optimal_gain
    assert not ModelSpec(value="gain", value_gain=1.0).optimal_gain
    assert ModelSpec(value="gain", value_gain=2.0).gain_start == 2.0


def test_sweep_theory_kinds_refuse_the_unset_gain(capsys, tmp_path):
    """The sweep's theory kinds solve at a fixed gain: the unset one is refused before any point."""
    rc, out, err = _run(capsys, ["sweep", "run", "--kind", "theory", "--param", "value=gain", "--param", "alpha=1.25",
                                 "--store", str(tmp_path / "s.db")])
    assert rc == 2 and err.count("\n") == 1 and "give value_gain with value = gain" in err
