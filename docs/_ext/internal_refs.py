"""Cross-references to attnphase objects that have no page of their own.

Docstrings name helpers and modules of the package (``:func:`refine_point```,
``:class:`attnphase.sweeps.phase.PhaseLines```) that the API reference does not document: they are
internals, or public objects documented under the name they are exported as
(``attnphase.sweeps.store.StoreError`` is documented as ``attnphase.sweeps.StoreError``). On Sphinx's
``missing-reference`` event this extension

* links the reference to the documented name of the same object where there is one;
* otherwise, if the name imports (from the docstring's module, its class, or any attnphase module
  that defines it), shows it as code without a link: it is real, only not documented;
* otherwise leaves the reference unresolved, so that a nitpicky build (``-n``) still reports a name
  that does not exist (a typo, a renamed function).

A subscripted annotation that Sphinx did not parse (``dict[str``, the first half of
``dict[str, Any]`` in a dataclass field's type) is shown as code.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

_PY_ROLES = {"class", "func", "meth", "data", "attr", "mod", "obj", "exc", "const"}


def _lookup(name: str) -> Any:
    """The object a dotted name denotes (importing its module), or raise ``LookupError``."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            raise LookupError(name) from None
        return obj
    raise LookupError(name)


def _documented(env: BuildEnvironment) -> dict[int, str]:
    """id(object) -> the name it is documented under (first documented name wins)."""
    cache = getattr(env, "_attnphase_documented", None)
    if cache is None:
        cache = {}
        for name in sorted(env.get_domain("py").objects):
            try:
                obj = _lookup(name)
            except LookupError:
                continue
            if not isinstance(obj, (str, int, float, tuple, bool, type(None))):
                cache.setdefault(id(obj), name)
        env._attnphase_documented = cache  # type: ignore[attr-defined]
    return cache


def _candidates(node: pending_xref) -> list[str]:
    target = node["reftarget"].lstrip("~.")
    module = node.get("py:module") or ""
    cls = node.get("py:class") or ""
    names = [target]
    if module:
        names += [f"{module}.{cls}.{target}" if cls else "", f"{module}.{target}"]
    # a name imported under TYPE_CHECKING only, or given without its module: any loaded attnphase
    # module that defines it
    short = target.split(".")[0]
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("attnphase") and mod is not None:
            obj = getattr(mod, short, None)
            defined_here = getattr(obj, "__module__", None)
            # a class or function of the package, or a constant (no __module__) of an attnphase module
            if obj is not None and (defined_here is None or str(defined_here).startswith("attnphase")):
                names.append(f"{mod_name}.{target}")
    return [n for n in names if n]


def resolve(app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element) -> nodes.Element | None:
    if node.get("refdomain") != "py" or node.get("reftype") not in _PY_ROLES:
        return None
    target = node["reftarget"]
    if "[" in target or "]" in target:
        return contnode
    for name in _candidates(node):
        try:
            obj = _lookup(name)
        except LookupError:
            continue
        if not name.startswith("attnphase"):
            return None  # another project's name: intersphinx's business
        documented = _documented(env).get(id(obj))
        if documented is not None and documented != name:
            new = node.deepcopy()
            new["reftarget"] = documented
            found = env.get_domain("py").resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], documented, new, contnode)
            if found is not None:
                return found
        return contnode
    return None


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("missing-reference", resolve, priority=900)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
