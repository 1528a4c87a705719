"""One schema for the model's parameters: the fields of ModelSpec give the CLI flags, the sweep
parameters and the validation, and the three routes build the same spec from the same values."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import numpy as np
import pytest

from attnphase._json import jsonable
from attnphase.cli import main
from attnphase.cli.common import add_model_flags, json_text, spec_from_args
from attnphase.cli.train_flags import add_value_flags
from attnphase.spec import ModelSpec, model_parameters
from attnphase.spec.attention import MODELS
from attnphase.spec.parse import parse_matrix, parse_range, to_bool, to_float, to_int
from attnphase.sweeps.grid import sweep_from_args
from attnphase.sweeps.kinds import MODEL_PARAMS, get_kind, model_spec

FIELDS = [f.name for f in dataclasses.fields(ModelSpec)]

#: One non-default value per field, as CLI text (matrices ';' and ',', booleans a flag).
TEXT = {
    "omega": "0.2", "sigma": "0.7", "lam": "0.05", "A": "0.7,0.3;0.2,0.8", "L": "2", "rank": "2",
    "teacher_rank": "1", "positions": "1,-0.5;-0.5,1", "variant": "untied", "causal_target": "true",
    "token_corr": "0.1", "token_cov": "0.3,0.05;0.05,0.2", "value": "lowrank", "value_rank": "2",
    "value_gain": "1.1", "lam_lin": "0.001", "mixture": "2", "mixture_sep": "0.5", "mixture_gram": "0.5,-0.5;-0.5,0.5",
    "mixture_align": "0.3,-0.3", "mixture_probs": "0.5,0.5",
}
VALUES = {
    "omega": 0.2, "sigma": 0.7, "lam": 0.05, "A": ((0.7, 0.3), (0.2, 0.8)), "L": 2, "rank": 2,
    "teacher_rank": 1, "positions": ((1.0, -0.5), (-0.5, 1.0)), "variant": "untied",
    "causal_target": True, "token_corr": 0.1, "token_cov": ((0.3, 0.05), (0.05, 0.2)),
    "value": "lowrank", "value_rank": 2, "value_gain": 1.1, "lam_lin": 0.001, "mixture": 2, "mixture_sep": 0.5,
    "mixture_gram": ((0.5, -0.5), (-0.5, 0.5)), "mixture_align": ((0.3, -0.3),), "mixture_probs": ((0.5, 0.5),),
}
#: The cross-attention fields (docs/model.md section 10), which need a cross-attention variant: their
#: own non-default values, with the fields they combine with.
TEXT_CROSS = {
    "variant": "untied-cross", "L_keys": "3", "A": "0.5,0.3,0.2;0.2,0.3,0.5", "key_positions": "1,0,0;0,1,0;0,0,1",
    "cross_positions": "0.5,0,0;-0.5,0,0",
}
VALUES_CROSS = {
    "variant": "untied-cross", "L_keys": 3, "A": ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)),
    "key_positions": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
    "cross_positions": ((0.5, 0.0, 0.0), (-0.5, 0.0, 0.0)),
}

#: The heads and attention maps (docs/model.md section 11): several heads need the tied rank-1 student.
TEXT_HEADS = {"heads": "2", "head_gains": "trained", "head_gain_values": "0.6,0.4", "activation": "sigmoid",
              "teacher_activation": "relu"}
VALUES_HEADS = {"heads": 2, "head_gains": "trained", "head_gain_values": ((0.6, 0.4),), "activation": "sigmoid",
                "teacher_activation": "relu"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_model_flags(p)
    add_value_flags(p)
    return p


def _flags(p: argparse.ArgumentParser) -> dict[str, str]:
    """dest -> option string of every flag of ``p`` but ``--help``."""
    return {a.dest: a.option_strings[0] for a in p._actions if a.option_strings and a.dest != "help"}


def test_every_field_has_one_flag_and_one_sweep_parameter():
    assert set(TEXT) | set(TEXT_CROSS) | set(TEXT_HEADS) == set(VALUES) | set(VALUES_CROSS) | set(VALUES_HEADS) == set(FIELDS)
    assert [p.name for p in model_parameters()] == FIELDS
    flags = _flags(_parser())
    assert set(flags) == set(FIELDS)
    for p in model_parameters():
        assert flags[p.name] == p.flag == "--" + p.name.replace("_", "-")
    assert [p.name for p in MODEL_PARAMS] == FIELDS
    for kind in ("theory", "transition", "curve", "simulation"):
        names = set(get_kind(kind).param_map())
        assert set(FIELDS) <= names, kind


def test_flag_groups():
    """``--value``, ``--value-rank``, ``--lam-lin`` only on the commands that train; a command
    with its own ``--omega`` leaves it out."""
    p = argparse.ArgumentParser()
    add_model_flags(p, omega=False)
    assert set(_flags(p)) == set(FIELDS) - {"omega", "value", "value_rank", "value_gain", "lam_lin"}
    p = argparse.ArgumentParser()
    add_value_flags(p)
    assert set(_flags(p)) == {"value", "value_rank", "value_gain", "lam_lin"}


def test_defaults_agree():
    spec = ModelSpec()
    assert spec_from_args(_parser().parse_args([])) == spec
    for p, param in zip(model_parameters(), MODEL_PARAMS, strict=True):
        assert param.default == p.default == next(f.default for f in dataclasses.fields(ModelSpec)
                                                  if f.name == p.name)
        assert param.type == p.kind
    (point,) = sweep_from_args("simulation", []).points()
    assert model_spec(point.params) == spec
    extensions = {p.name for p in model_parameters() if p.info.extension}
    assert {k: point.params[k] for k in FIELDS if k not in extensions} == {
        k: v for k, v in json.loads(json.dumps(spec.to_dict())).items() if k not in extensions}
    assert not extensions & set(point.params)  # (at their defaults: left out of the key)


@pytest.mark.parametrize("TEXT, VALUES", [(TEXT, VALUES), (TEXT_CROSS, VALUES_CROSS), (TEXT_HEADS, VALUES_HEADS)],
                         ids=["all", "cross", "heads"])
def test_library_cli_and_sweeps_build_the_same_spec(TEXT, VALUES):
    library = ModelSpec(**VALUES)
    argv = []
    for name, text in TEXT.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if name == "causal_target" else [flag, text]
    cli = spec_from_args(_parser().parse_args(argv))
    items = [f"{name}={text}" for name, text in TEXT.items()]
    (point,) = sweep_from_args("simulation", items).points()
    sweep = model_spec(point.params)
    assert cli == library == sweep
    assert library.to_dict()["A"] == [list(r) for r in VALUES.get("A", ModelSpec().A)]
    # the sweep stores the spec's own (JSON) form, which builds the spec again; extension fields
    # at their defaults are left out
    stored = json.loads(json.dumps(library.to_dict()))
    left_out = {p.name for p in model_parameters() if p.info.extension and stored[p.name] == p.default}
    assert {k: point.params[k] for k in FIELDS if k not in left_out} == {
        k: v for k, v in stored.items() if k not in left_out}
    assert not left_out & set(point.params)
    assert ModelSpec(**library.to_dict()) == library


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("omega", "1.5", "omega must lie in [0, 1], got 1.5"),
        ("sigma", "0", "sigma must be > 0, got 0.0"),
        ("lam", "-1", "lam must be >= 0, got -1.0"),
        ("rank", "0", "rank must be >= 1, got 0"),
        ("variant", "sideways", f"unknown variant 'sideways'; choose from {', '.join(MODELS)}"),
        ("value", "dense", "unknown value 'dense'; choose from identity, lowrank, full, gain"),
    ],
)
def test_one_message_for_a_bad_value_on_every_route(name, text, message, capsys):
    with pytest.raises(ValueError) as lib:
        ModelSpec(**{name: text})  # (the library converts text too)
    assert str(lib.value) == message
    with pytest.raises(ValueError) as cli:
        spec_from_args(_parser().parse_args(["--" + name.replace("_", "-"), text]))
    assert str(cli.value) == message
    with pytest.raises(ValueError) as sweep:
        sweep_from_args("simulation", [f"{name}={text}"]).points()
    assert str(sweep.value) == message
    assert main(["simulate", "--max-steps", "1", "--" + name.replace("_", "-"), text]) == 2
    assert capsys.readouterr().err == f"attnphase simulate: error: {message}\n"


def test_text_of_a_flag_names_the_flag():
    p = _parser()
    for flag, msg in (("--sigma", "--sigma must be a number, got 'x'"),
                      ("--L", "--L must be an integer, got '2.5'"),
                      ("--A", "cannot parse --A '1,x;0,1'")):
        text = {"--sigma": "x", "--L": "2.5", "--A": "1,x;0,1"}[flag]
        with pytest.raises(ValueError) as exc:
            spec_from_args(p.parse_args([flag, text]))
        assert str(exc.value).startswith(msg)


def test_parsers():
    assert to_float("0.5", "x") == 0.5 and to_float(np.float32(2), "x") == 2.0
    for bad, msg in ((True, "x must be a number, got True"), ("a", "x must be a number, got 'a'"),
                     ("nan", "x must be finite, got 'nan'")):
        with pytest.raises(ValueError, match=msg):
            to_float(bad, "x")
    assert to_int("3", "n") == 3 and to_int(3.0, "n") == 3 and to_int(np.int64(4), "n") == 4
    for bad in ("3.5", 3.5, True, None, "x"):
        with pytest.raises(ValueError, match="n must be an integer"):
            to_int(bad, "n")
    assert to_bool("Yes", "b") is True and to_bool(0, "b") is False and to_bool(np.bool_(1), "b")
    with pytest.raises(ValueError, match="b must be true/false"):
        to_bool("maybe", "b")
    assert parse_matrix("1, 0; 0, 1") == ((1.0, 0.0), (0.0, 1.0))
    # every way a range can be malformed gives the same one-line message
    for bad in ("a:b", "0:x:3", "0:1:y", "1,z"):
        with pytest.raises(ValueError, match=rf"cannot parse --alpha '{bad}': expected"):
            parse_range(bad, "--alpha")


def test_one_json_conversion():
    class Result:
        def to_dict(self):
            return {"x": np.float64(1.5)}

    obj = {1: (np.int64(2), np.bool_(True), math.nan, np.array([0.5, np.inf])), "r": Result(),
           "s": "text", "n": None}
    plain = {"1": [2, True, None, [0.5, None]], "r": {"x": 1.5}, "s": "text", "n": None}
    assert jsonable(obj) == plain
    assert json.loads(json_text(obj)) == plain
