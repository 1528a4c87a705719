"""Theory commands: ``solve``, ``transition``, ``curves``.

Each parses its flags, calls :func:`attnphase.solve` / :func:`attnphase.transition` /
:func:`attnphase.curves` and prints or writes the result; the solver flags start from a named preset
(``--preset``, :meth:`attnphase.SolverSettings.preset`), the common settings as flags of their own
and every setting as ``--solver NAME=VALUE``, all made from the schema of
:class:`~attnphase.SolverSettings` (:func:`add_solver_flags`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from attnphase import api, api_sweeps
from attnphase.cli.common import (
    COMMAND_KEY,
    OUTPUT,
    SOLVER,
    add_model_flags,
    add_theory_value_flags,
    alpha_grid,
    check_out_folder,
    command_record,
    flag_group,
    json_text,
    print_record,
    progress_printer,
    save_figure,
    spec_from_args,
    to_float,
    warn_theory_cost,
)
from attnphase.results import SolveResult, describe_change
from attnphase.spec.defaults import (
    ONE_START_SETTINGS,
    SOLVER_PRESET,
    TRANSITION_GRID,
    number_text,
    range_text,
)
from attnphase.theory import (
    SolverSettings,
    branches_for,
)
from attnphase.theory.bracket import ALPHA_MAX, ALPHA_MIN
from attnphase.theory.jumps import check_jumps, jump_share, start_from
from attnphase.theory.settings import solver_changes, solver_parameters
from attnphase.theory.stability import check_stability, positional_stability

#: the solver preset (``SolverSettings.preset``) of each theory command when ``--preset`` is not
#: given: that of its library function (:data:`attnphase.spec.defaults.SOLVER_PRESET`)
COMMAND_PRESET = SOLVER_PRESET


#: the common solver settings that only ``solve`` has as flags of their own (the error target of
#: :func:`attnphase.theory.solve_refined`); the other theory commands take them through ``--solver``
SOLVE_ONLY = ("target_error",)


def add_solver_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The solver flags of a theory command, in its ``solver`` argument group, made from the
    schema of :class:`SolverSettings` (:func:`attnphase.theory.settings.solver_parameters`):
    ``--preset``, one flag per common setting, and ``--solver NAME=VALUE`` for every setting by
    its field name (the rare ones only so). Each setting defaults to the value of the command's
    preset (:data:`COMMAND_PRESET`, or the one ``--preset`` names); a flag given explicitly wins."""
    p = flag_group(parser, SOLVER)
    name = COMMAND_PRESET[command]
    st = SolverSettings.preset(name)
    p.add_argument("--preset", default=name, choices=tuple(SolverSettings.PRESETS),
                   help=f"solver settings by name: {', '.join(SolverSettings.PRESETS)} (default {name!r}); the "
                        "flags below override single settings")
    for prm in solver_parameters():
        if prm.info.rare or (prm.name in SOLVE_ONLY and command != "solve"):
            continue
        text = f"{prm.help} (default {_setting_text(getattr(st, prm.name))})"
        if prm.name == "response":
            text += (f"; semantic-start and positional-start run on one rule of --order (default "
                     f"{ONE_START_SETTINGS['order']}), rank 1, tied or causal, one branch")
        p.add_argument(prm.flag, dest=prm.name, default=None, help=text)
    rare = ", ".join(f"{prm.name} ({_setting_text(getattr(st, prm.name))})"
                     for prm in solver_parameters() if prm.info.rare)
    p.add_argument("--solver", action="append", default=[], metavar="NAME=VALUE",
                   help=f"any solver setting by its field name, repeatable, e.g. --solver max_iter=500; the "
                        f"rare ones (with this command's defaults): {rare}. docs/solver.md")


def _setting_text(v: Any) -> str:
    """A setting's value as a help text writes it: ``1e-8``, ``0.7``, ``qmc``, ``auto`` for ``None``."""
    if v is None:
        return "auto"
    if isinstance(v, float):
        return number_text(v)
    return str(v)


def settings_from_args(args: argparse.Namespace) -> SolverSettings:
    """The :class:`SolverSettings` of a theory command: its preset (``--preset``) with every
    ``--solver NAME=VALUE`` item and every solver flag given on the command line applied on top
    (a one-start ``--response`` on one rule: :meth:`SolverSettings.preset`). ``ValueError`` (one
    line) for a bad value or a setting given both as a flag and in ``--solver``."""
    changes = solver_changes(getattr(args, "solver", None) or ())
    for prm in solver_parameters():
        text = getattr(args, prm.name, None) if not prm.info.rare else None
        if text is None:
            continue
        if prm.name in changes:
            raise ValueError(f"{prm.name} given twice: {prm.flag} and --solver {prm.name}=...")
        changes[prm.name] = prm.coerce(prm.from_text(text))
    return SolverSettings.preset(getattr(args, "preset", None) or "default", **changes)


def cmd_solve(args: argparse.Namespace) -> int:
    """``attnphase solve``: the fixed points at one ``alpha`` (:func:`attnphase.solve`)."""
    spec = spec_from_args(args)
    warn_theory_cost(spec)
    alpha = to_float(args.alpha, "alpha")
    if alpha <= 0:
        raise ValueError(f"--alpha must be > 0, got {alpha}")
    known = branches_for(spec)
    if args.branch not in (*known, "all"):
        raise ValueError(f"--branch must be one of {', '.join(known)}, all; got {args.branch!r}")
    settings = settings_from_args(args)
    several = args.branch == "all" and len(known) > 1
    if args.stability:
        check_stability(spec)
    # (the positional-start selection's point is always examined where the theta block covers the model: a
    # saddle towards theta is a state gradient descent leaves, docs/model.md (3.7))
    stability = args.stability or (settings.response == "positional-start" and _stability_covers(spec))
    if args.jumps:
        check_jumps(spec)
    res = api.solve(alpha, branch=args.branch, spec=spec, settings=settings,
                progress=None if args.json or not several else progress_printer("solve", "branches"))
    stab = _stability(spec, alpha, res, settings) if stability else None
    jumps = _jumps(spec, alpha, res, quiet=args.json) if args.jumps else None
    if args.json:
        extra = {**({} if stab is None else {"positional_stability": stab}),
                 **({} if jumps is None else {"jump_share": jumps})}
        print_record(args, {**res.to_dict(), **extra})
        return 0
    print(f"alpha = {alpha:g}, omega = {spec.omega:g}, sigma = {spec.sigma:g}, lambda = {spec.lam:g}")
    print(f"{'branch':<11}{'q':>10}{'m':>10}{'theta':>10}{'V':>10}{'train':>12}{'test':>12}  status")
    for b, r in res.branches.items():
        if r is not None:
            err = r.overlap_error
            est = f" (rel. error est. {err:.1e})" if err is not None else ""
            m, theta = (0.0 if abs(v) < 5e-6 else v for v in (r.m, r.theta))  # no "-0.00000"
            status = "coarse rule only" if r.coarse_only else "ok"  # (a note below says why)
            print(f"{b:<11}{r.q:>10.5f}{m:>10.5f}{theta:>10.5f}{r.V:>10.4f}"
                  f"{r.train_loss:>12.6f}{r.test_error:>12.6f}  {status}, {r.iterations} it{est}")
        else:
            print(f"{b:<11}{'-':>10}{'-':>10}{'-':>10}{'-':>10}{'-':>12}{'-':>12}  {res.absent[b]}")
    if args.branch == "all" or len(known) == 1:
        glob = f"global minimum: {res.global_minimum or 'none found'}"
        if res.idle_limit is not None and res.idle_limit.get("below"):
            glob += " among the branches with both heads active (below: a head idle)"
    else:  # (one branch alone: nothing was compared, so no global minimum is claimed)
        glob = f"global minimum: not compared (only {args.branch} solved; --branch all compares the branches)"
    print(f"{glob}; linear baseline test error {res.linear_test_error:.6f}")
    _print_gains(res)
    for b, r in res.branches.items():
        for note in r.notes if r is not None else ():
            print(f"note: {b}: {note}")
    if stab is not None and stab["success"]:
        print(f"note: positional: {stab['message']} (d^2 eps_t / d theta^2 = a (1 - F') = "
              f"{stab['curvature']:+.2e} on the order-{stab['order']} rule; docs/cross.md)")
    elif stab is not None:
        print(f"note: positional: --stability: {stab['message']}")
    elif args.stability:
        print("note: --stability: no positional fixed point solved here, nothing to examine")
    for b, j in (jumps or {}).items():
        if not j["success"]:
            print(f"note: jumps: {b}: {j['message']}")
            continue
        check = " (above 0.05: check this branch against simulation, docs/variants.md)" if j["share"] > 0.05 else ""
        print(f"note: jumps: {b}: J = {j['share']:.3f} +- {j['share_error']:.3f}, the share of the stiffness "
              f"lambda + sigma^2 V_hat that the minimiser's jumps take away{check}")
    return 0


def _jumps(spec: Any, alpha: float, res: SolveResult, quiet: bool) -> dict[str, Any]:
    """``solve --jumps``: the jump share of ``V_hat`` of every solved branch (docs/model.md (3.5);
    :func:`attnphase.theory.jumps.jump_share`), each rule's fixed point started from the solve's."""
    out: dict[str, Any] = {}
    for b, r in res.branches.items():
        if r is None:
            continue
        if not quiet:
            print(f"jumps: {b} ...", file=sys.stderr, flush=True)
        j = jump_share(spec, alpha, b, start=start_from(spec, r.q_matrix, r.m_matrix, r.V, r.theta_matrix,
                                                         r.s_matrix))
        out[b] = {"share": j.share, "share_error": j.share_error, "order": j.order,
                  "seeds": list(j.seeds), "stein": list(j.stein), "pointwise": list(j.pointwise),
                  "success": j.success, "message": j.message}
    return out


def _stability_covers(spec: Any) -> bool:
    """Whether the theta block (:func:`attnphase.theory.stability.check_stability`) covers ``spec``."""
    try:
        check_stability(spec)
    except ValueError:
        return False
    return True


def _stability(spec: Any, alpha: float, res: SolveResult, settings: SolverSettings) -> dict[str, Any] | None:
    """``solve --stability``: the theta block of the positional fixed point (docs/cross.md, "Is the
    positional fixed point a minimum of the risk?"; :func:`attnphase.theory.stability.positional_stability`),
    ``None`` where the positional branch was not solved or not found. Under the positional-start
    selection (docs/model.md (3.7)) the block of that selection's point, on the solve's rule."""
    r = res.branches.get("positional")
    if r is None:
        return None
    # (from the solve's own point: the branch's start can fall to the trivial branch on the examined rule,
    # as at alpha 3.6, omega 0.3)
    start = start_from(spec, r.q_matrix, r.m_matrix, r.V, r.theta_matrix)
    if settings.response == "positional-start":
        st = positional_stability(spec, alpha, order=settings.order, seed=settings.seed, response=settings.response,
                                  start=start)
    else:
        st = positional_stability(spec, alpha, start=start)
    return {"slope": st.slope, "a": st.a, "curvature": st.curvature, "saddle": st.saddle, "order": st.order,
            "seed": st.seed, "success": st.success, "message": st.message}


def _print_gains(res: SolveResult) -> None:
    """The value gain of each branch (``--value gain``, docs/model.md (6.5)) or its trained head
    gains (``--head-gains trained``, (11.4)) under the table."""
    for b, r in res.branches.items():
        if r is not None and r.gain is not None:
            how = f"optimal, +- {r.gain_error:.1e}" if res.spec.optimal_gain else "fixed"
            print(f"value gain: {b} v = {r.gain:.6f} ({how})")
        if r is not None and r.head_gains is not None:
            vals = ", ".join(f"{v:.6f} +- {e:.1e}" for v, e in zip(r.head_gains, r.head_gains_error or (), strict=True))
            print(f"head gains (optimal): {b} v = {vals}")
    if res.idle_limit is not None:
        print(f"note: {res.idle_limit['message']}")
    if not res.success:
        for part in res.message.split("; "):
            if "search failed" in part:
                print(f"note: {part}")


def cmd_transition(args: argparse.Namespace) -> int:
    """``attnphase transition``: ``alpha_c``, ``alpha_l`` and the spinodals at one ``omega``
    (:func:`attnphase.transition`)."""
    spec = spec_from_args(args)
    warn_theory_cost(spec)
    grid = alpha_grid(args.alpha) if args.alpha is not None else None
    settings = settings_from_args(args)
    tr = api.transition(alphas=grid, spec=spec, settings=settings,
                    progress=None if args.json else progress_printer("transition"))
    if args.json:
        print_record(args, tr.to_dict())
        return 0

    def fmt(v: float | None, key: str = "") -> str:
        if v is None:
            return "none"
        e = tr.errors.get(key)
        return f"{v:.4f}" + (f" +- {e:.4f}" if e is not None else "")

    print(f"omega = {spec.omega:g}: alpha_c = {fmt(tr.alpha_c, 'alpha_c')}, alpha_l = {fmt(tr.alpha_l, 'alpha_l')}, "
          f"spinodals: semantic {fmt(tr.spinodals['semantic'], 'spinodal_semantic')}, "
          f"positional {fmt(tr.spinodals['positional'], 'spinodal_positional')}; "
          f"linear baseline test error {tr.linear_test_error:.6f}")
    if tr.alpha_c is not None:  # (docs/model.md (5.5))
        print(f"global minimum at alpha_c: {describe_change(tr.kind, tr.exchange, tr.order_parameter)}")
    if tr.alpha_range is not None:
        print(f"alpha range searched: {tr.alpha_range[0]:g} to {tr.alpha_range[1]:g}")
    if tr.reason is not None:
        print(f"reason: {tr.reason}")
    for n in tr.notes:
        if n != tr.reason:
            print(f"note: {n}")
    return 0


def cmd_curves(args: argparse.Namespace) -> int:
    """``attnphase curves``: the paper-style figure of both branches against ``alpha``
    (:func:`attnphase.curves`)."""
    spec = spec_from_args(args)
    api_sweeps.check_fixed_gain(spec, "curves")
    if args.bayes:  # (refused before the branches are followed, not after)
        from attnphase.theory.bayes import check_bayes_spec

        check_bayes_spec(spec)
    warn_theory_cost(spec)
    grid = alpha_grid(args.alpha).tolist()
    settings = settings_from_args(args)
    out = check_out_folder(args.out)  # (an output folder that cannot be made is refused before the work)
    res = api_sweeps.curves(grid, transition=args.transition, bayes=args.bayes, spec=spec, settings=settings,
                            progress=progress_printer("curves"))
    out.mkdir(parents=True, exist_ok=True)
    res.table().to_csv(out / "curves.csv", index=False)
    (out / "curves.json").write_text(json_text({COMMAND_KEY: command_record(args), **res.to_dict()}))
    save_figure(res.plot(), out, "curves")
    print(f"wrote {out / 'curves.png'}, {out / 'curves.pdf'}, {out / 'curves.csv'}, {out / 'curves.json'}")
    if res.transition is not None:
        print(f"alpha_c = {res.alpha_c}, alpha_l = {res.alpha_l}, linear baseline {res.linear_test_error:.6f}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``solve``, ``transition`` and ``curves`` to the ``attnphase`` command line."""
    p = sub.add_parser("solve", help="fixed points (semantic, positional, trivial) at one alpha")
    p.add_argument("--alpha", required=True, help="sample complexity n/d")
    add_model_flags(p)
    add_theory_value_flags(p)
    add_solver_flags(p, "solve")
    p.add_argument("--branch", default="all",
                   help="semantic, positional, trivial, mixed (rank >= 2: one direction semantic, one positional) or all (default)")
    p.add_argument("--stability", action="store_true",
                   help="also the stability of the positional fixed point against theta: F' > 1 a saddle of the "
                        "risk, F' < 1 a minimum along theta (rank 1, tied, causal or cross; docs/cross.md; always on with "
                        "--response positional-start where it covers the model)")
    p.add_argument("--jumps", action="store_true",
                   help="also the jump share of every branch: the fraction of the weights step's stiffness that "
                        "the proximal minimiser's jumps take away; where it is not small, check the branch against "
                        "simulation (docs/model.md (3.5), docs/variants.md; seconds to a minute per branch)")
    flag_group(p, OUTPUT).add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("transition", help="alpha_c, alpha_l and spinodals at one omega")
    add_model_flags(p)
    add_theory_value_flags(p)
    add_solver_flags(p, "transition")
    p.add_argument("--alpha", default=None,
                   help=f"bracketing grid start:stop:num, searched as given (default: start on "
                        f"{range_text(TRANSITION_GRID)} and widen the range, down to {ALPHA_MIN:g} and up to "
                        f"{ALPHA_MAX:g}, until the training errors cross or there is a reason for no transition)")
    flag_group(p, OUTPUT).add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_transition)

    p = sub.add_parser("curves", help="paper-style curves vs alpha (PNG, PDF, CSV)")
    add_model_flags(p)
    add_theory_value_flags(p)
    add_solver_flags(p, "curves")
    grid = ":".join(f"{v:g}" for v in api_sweeps.CURVES_GRID)
    p.add_argument("--alpha", default=grid, help=f"alpha grid start:stop:num (default {grid})")
    flag_group(p, OUTPUT).add_argument("--out", default="attnphase-out", help="output folder")
    p.add_argument("--no-transition", dest="transition", action="store_false",
                   help="skip locating alpha_c and alpha_l")
    p.add_argument("--bayes", action="store_true",
                   help="add the Bayes-optimal overlap and test error (attnphase bayes) to the figure and tables")
    p.set_defaults(func=cmd_curves)
