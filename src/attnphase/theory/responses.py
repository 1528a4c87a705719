"""Which minimum of the proximal problem a node takes and how it responds (docs/model.md (3.3),
(3.6), (3.7)): the responses and the check that one covers a model.
"""

from __future__ import annotations

from attnphase.spec.attention import names
from attnphase.spec.problem import ModelSpec

#: which minimum of the proximal problem a node takes and how it responds (docs/model.md (3.3),
#: (3.6), (3.7)): the global minimiser with the Stein form (jumps included); the global minimiser
#: followed locally; the minimum reached from the teacher's fields at the student's norm (the
#: state gradient descent from the semantic start holds); the minimum reached from the student's
#: positional means (the state gradient descent from the positional start holds)
RESPONSES = ("global", "local", "semantic-start", "positional-start")


#: the one-start selections of docs/model.md (3.7) and the branch each describes
ONE_START = {"semantic-start": "semantic", "positional-start": "positional"}


def check_response(spec: ModelSpec, response: str, branches: tuple[str, ...] = ()) -> None:
    """Refuse (``ValueError``, one line) a ``response`` that does not cover the model ``spec`` or
    one of the ``branches`` asked for: every response but the global one covers uncorrelated
    tokens (docs/model.md (3.6)); a one-start selection (:data:`ONE_START`) the tied and causal
    students of rank 1 and one head without a mixture, with any attention map of student and
    teacher, and only the branch its start describes (3.7). Called
    before any work, so that a command refuses at once rather than after its first solves."""
    if response not in RESPONSES:
        raise ValueError(f"unknown response {response!r}; choose from {', '.join(RESPONSES)}")
    if response != "global" and not spec.uncorrelated:
        raise ValueError(f"the {response} response covers uncorrelated tokens (no --token-corr)")
    if response not in ONE_START:
        return
    if (spec.rank != 1 or spec.teacher_rank != 1 or spec.variant not in names("one-start") or spec.mixture
            or spec.heads != 1):
        covered = " and ".join(names("one-start"))
        raise ValueError(f"the {response} response covers the {covered} students of rank 1 (r = r* = 1) "
                         "and one head without a mixture")
    own = ONE_START[response]
    others = [b for b in branches if b != own]
    if others:
        raise ValueError(f"the {response} response describes the {own} branch only (docs/model.md (3.7)), "
                         f"not the {', '.join(others)} one{'s' if len(others) > 1 else ''} asked for here: "
                         f"give the {own} branch alone (--branch {own})")
