"""napoleon (numpydoc sections) for functions, classes and methods only.

The public docstrings have numpydoc sections (Parameters, Returns, Raises, Attributes), which
``sphinx.ext.napoleon`` renders. Napoleon also rewrites the docstring of every attribute and
property: it reads the words before the first colon of its first line as the attribute's type.
The package's attribute docstrings are sentences ("The refinement was tried and did not converge:
the values are the coarse rule's."), so this extension loads napoleon and keeps its docstring
processing away from attributes, properties and module data, whose docstrings stay as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx

#: the kinds of object whose docstrings napoleon leaves alone here
AS_WRITTEN = frozenset({"attribute", "property", "data"})


def setup(app: Sphinx) -> dict[str, Any]:
    from sphinx.ext import napoleon

    app.setup_extension("sphinx.ext.napoleon")

    def sections(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
        if what not in AS_WRITTEN:
            napoleon._process_docstring(app, what, name, obj, options, lines)

    listeners = app.events.listeners["autodoc-process-docstring"]
    found = [i for i, listener in enumerate(listeners) if listener.handler is napoleon._process_docstring]
    if len(found) != 1:
        raise RuntimeError("napoleon_sections: napoleon's docstring listener not found")
    listeners[found[0]] = listeners[found[0]]._replace(handler=sections)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
