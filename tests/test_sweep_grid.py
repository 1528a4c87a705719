"""Sweep specification: grids from flags and TOML, canonical keys, bad input."""

import pytest

from attnphase.spec.problem import model_parameters
from attnphase.sweeps import SweepSpec, point_key, sweep_from_args, sweep_from_toml
from attnphase.sweeps.canonical import canonical_json, canonical_value, round_sig
from attnphase.sweeps.kinds import get_kind


def test_cartesian_product_of_ranges_and_lists():
    s = sweep_from_args("selftest", ["x=0:1:5", "y=1,2,3", "seed=7"])
    pts = s.points()
    assert s.size == 15 and len(pts) == 15
    assert {p.params["x"] for p in pts} == {0.0, 0.25, 0.5, 0.75, 1.0}
    assert {p.params["y"] for p in pts} == {1.0, 2.0, 3.0}
    assert all(p.params["seed"] == 7 and p.seed == 7 for p in pts)
    assert len({p.key for p in pts}) == 15


def test_duplicate_grid_values_give_one_point():
    pts = sweep_from_args("selftest", ["x=1,1.0,1.00000000000001"]).points()
    assert len(pts) == 1


def test_key_uses_rounded_params_and_defaults():
    # 0.1 + 0.2 differs from 0.3 in the 17th digit only: same point after rounding
    assert point_key("selftest", {"x": 0.1 + 0.2}) == point_key("selftest", {"x": 0.3})
    assert point_key("selftest", {"x": 0.3}) != point_key("selftest", {"x": 0.3000001})
    assert point_key("selftest", {"x": 1.0}) != point_key("theory", {"x": 1.0})
    assert canonical_json({"b": 1, "a": [0.1 + 0.2]}) == '{"a":[0.3],"b":1}'
    assert round_sig(-0.0) == 0.0
    # giving a default explicitly is the same point as leaving it out
    a = SweepSpec("theory", fixed={"alpha": 1.5}).points()[0]
    b = SweepSpec("theory", fixed={"alpha": 1.5, "sigma": 0.5, "A": [[0.6, 0.4], [0.4, 0.6]]})
    assert a.key == b.points()[0].key


def test_theory_params_are_validated_model_specs():
    pts = sweep_from_args("theory", ["alpha=0.5,1", "omega=0,0.3", "branch=semantic,positional"]
                          ).points()
    assert len(pts) == 8
    p = pts[0].params
    assert p["A"] == [[0.6, 0.4], [0.4, 0.6]] and p["positions"] == [[1.0, -1.0], [-1.0, 1.0]]
    with pytest.raises(ValueError, match="omega"):
        sweep_from_args("theory", ["omega=0,2"]).points()
    with pytest.raises(ValueError, match="branch"):
        sweep_from_args("theory", ["branch=semantic,diagonal"]).points()
    with pytest.raises(ValueError, match="alpha"):
        sweep_from_args("theory", ["alpha=-1,1"]).points()


def test_matrix_and_string_and_bool_axes():
    s = sweep_from_args("transition", ["A=0.6,0.4;0.4,0.6|0.3,0.7;0.8,0.2",
                                       "variant=tied,untied", "causal_target=false"])
    pts = s.points()
    assert len(pts) == 4
    assert {str(p.params["A"]) for p in pts} == {"[[0.6, 0.4], [0.4, 0.6]]",
                                                "[[0.3, 0.7], [0.8, 0.2]]"}


@pytest.mark.parametrize(
    "items, match",
    [
        (["nonsense=1,2"], "unknown parameter 'nonsense'"),
        (["x=0:1:0"], "empty"),
        (["x="], "empty"),
        (["x=a,b"], "cannot parse"),
        (["x"], "NAME=VALUES"),
        (["seed=0.5,1"], "integers"),
        (["fail=maybe"], "true/false"),
    ],
)
def test_bad_cli_params(items, match):
    with pytest.raises(ValueError, match=match):
        sweep_from_args("selftest", items)


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown point kind"):
        sweep_from_args("nope", [])


def test_toml_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('kind = "selftest"\n[grid]\nx = "0:1:3"\ny = [1, 2]\n[fixed]\nseed = 3\n')
    s = sweep_from_toml(f)
    assert s.kind == "selftest" and s.size == 6
    assert all(p.params["seed"] == 3 for p in s.points())
    # a CLI --param replaces the file's axis
    s2 = sweep_from_args("selftest", ["x=5"], base=s)
    assert {p.params["x"] for p in s2.points()} == {5.0}


@pytest.mark.parametrize(
    "text, match",
    [
        ('kind = "selftest"\n[grid\nx = 1', "malformed TOML"),
        ('kind = "selftest"\n[grid]\nbogus = [1, 2]', "unknown parameter 'bogus'"),
        ('kind = "selftest"\n[grid]\nx = []', "empty"),
        ('kind = "selftest"\n[grid]\nx = "1:2:0"', "empty"),
        ('kind = "selftest"\n[sweep]\nx = 1', "unknown top-level key"),
        ('[grid]\nx = 1', "kind"),
    ],
)
def test_bad_toml(tmp_path, text, match):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        sweep_from_toml(f)


def test_missing_toml(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        sweep_from_toml(tmp_path / "absent.toml")


def test_curve_kind_validates_its_alpha_grid():
    pts = sweep_from_args("curve", ["branch=semantic,positional", "alphas=0.1:2:5"]).points()
    assert [p.params["branch"] for p in pts] == ["semantic", "positional"]
    one = sweep_from_args("curve", ["alphas=0.5,1,2"]).points()
    assert len(one) == 1 and one[0].params["alphas"] == "0.5,1,2"
    with pytest.raises(ValueError, match="alphas must be > 0"):
        sweep_from_args("curve", ["alphas=0:2:5"]).points()
    with pytest.raises(ValueError, match="cannot parse"):
        sweep_from_args("curve", ["alphas=0.1:x:5"]).points()


#: Keys of three points of the plain model; stores written by earlier versions hold these keys.
PINNED_KEYS = {
    "theory": ({"alpha": 1.0, "omega": 0.3, "branch": "semantic"},
               "6ef7b1a3e935403c7eac9504ce221c194d2595e0d45fbd6ff1e2d5599ebb86e8"),
    "simulation": ({"alpha": 1.0, "omega": 0.3, "d": 200, "seed": 0, "init": "semantic"},
                   "e12f57c2e2622b3fb97103561c379976fec3582f58300c301f9f21de02e9e136"),
    "transition": ({"omega": 0.3, "variant": "causal"},
                   "cb5ff3b69057f0e55fae8b2edf5609c53f3101297071629e2c6bdfc71a1c024a"),
}


@pytest.mark.parametrize("kind", sorted(PINNED_KEYS))
def test_model_extensions_at_their_default_leave_the_point_key_alone(kind):
    """A point of the plain model keeps its key whatever extension fields the model has; a point
    that uses an extension names it in its parameters (and so has another key)."""
    raw, key = PINNED_KEYS[kind]
    params = canonical_value(get_kind(kind).normalize(raw))
    assert point_key(kind, params) == key
    extensions = {p.name for p in model_parameters() if p.info.extension}
    assert extensions and not extensions & set(params)
    mixed = canonical_value(get_kind(kind).normalize({**raw, "mixture": 2, "mixture_sep": 1.0,
                                                      "mixture_align": 0.5}))
    assert {"mixture", "mixture_sep", "mixture_align"} <= set(mixed)
    assert point_key(kind, mixed) != key
