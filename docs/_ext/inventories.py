"""Intersphinx without a network: the inventories of the external projects the API reference names.

``sphinx.ext.intersphinx`` links a name such as ``numpy.ndarray`` to its page in another project's
documentation by reading that project's ``objects.inv``, which it normally downloads. The site is
built offline (CI and the development machines reach only the package registries), so
:func:`write_inventories` writes, before each build, one small inventory per project holding the
external names that the public API's signatures and docstrings use, each with the address of its
page in that project's published documentation. ``docs/conf.py`` points ``intersphinx_mapping`` at
these files; the links in the built pages go to the projects' online documentation.

A name missing from :data:`EXTERNAL` shows as an unresolved reference in a nitpicky build
(``-n``); add it here with its documented address.
"""

from __future__ import annotations

import zlib
from pathlib import Path

#: project -> (base address of its documentation, {name: (domain:role, page#anchor relative to the base)})
EXTERNAL: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "python": ("https://docs.python.org/3/", {
        "collections.abc.Mapping": ("py:class", "library/collections.abc.html#collections.abc.Mapping"),
        "collections.abc.Sequence": ("py:class", "library/collections.abc.html#collections.abc.Sequence"),
        "collections.abc.Callable": ("py:class", "library/collections.abc.html#collections.abc.Callable"),
        "collections.abc.Iterator": ("py:class", "library/collections.abc.html#collections.abc.Iterator"),
        "collections.abc.Iterable": ("py:class", "library/collections.abc.html#collections.abc.Iterable"),
        "pathlib.Path": ("py:class", "library/pathlib.html#pathlib.Path"),
        "dataclasses.asdict": ("py:function", "library/dataclasses.html#dataclasses.asdict"),
        "types.MappingProxyType": ("py:class", "library/types.html#types.MappingProxyType"),
    }),
    "numpy": ("https://numpy.org/doc/stable/", {
        "numpy.ndarray": ("py:class", "reference/generated/numpy.ndarray.html#numpy.ndarray"),
        "numpy.random.Generator": ("py:class", "reference/random/generator.html#numpy.random.Generator"),
    }),
    "pandas": ("https://pandas.pydata.org/docs/", {
        "pandas.DataFrame": ("py:class", "reference/api/pandas.DataFrame.html#pandas.DataFrame"),
    }),
    "torch": ("https://docs.pytorch.org/docs/stable/", {
        "torch.Tensor": ("py:class", "tensors.html#torch.Tensor"),
        "torch.dtype": ("py:class", "tensor_attributes.html#torch.dtype"),
        "torch.device": ("py:class", "tensor_attributes.html#torch.device"),
    }),
    "matplotlib": ("https://matplotlib.org/stable/", {
        "matplotlib.figure.Figure": ("py:class", "api/_as_gen/matplotlib.figure.Figure.html#matplotlib.figure.Figure"),
        "matplotlib.axes.Axes": ("py:class", "api/_as_gen/matplotlib.axes.Axes.html#matplotlib.axes.Axes"),
    }),
    "scipy": ("https://docs.scipy.org/doc/scipy/", {
        "scipy.optimize.OptimizeResult": (
            "py:class", "reference/generated/scipy.optimize.OptimizeResult.html#scipy.optimize.OptimizeResult"),
    }),
}

#: names as the annotations spell them (modules imported under a short name, classes imported by
#: name) -> the full name of :data:`EXTERNAL` they stand for; listed in the same inventory
ALIASES: dict[str, str] = {
    "pd.DataFrame": "pandas.DataFrame",
    "np.ndarray": "numpy.ndarray",
    "Figure": "matplotlib.figure.Figure",
    "Path": "pathlib.Path",
}


def inventory_bytes(project: str, entries: dict[str, tuple[str, str]]) -> bytes:
    """An ``objects.inv`` (Sphinx inventory version 2) listing ``entries``."""
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project}\n"
        "# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = "".join(f"{name} {role} 1 {uri} -\n" for name, (role, uri) in sorted(entries.items()))
    return header.encode() + zlib.compress(body.encode())


def write_inventories(folder: Path) -> dict[str, tuple[str, str]]:
    """Write one inventory per project of :data:`EXTERNAL` into ``folder``; return the
    ``intersphinx_mapping`` that reads them (name -> (online base address, local inventory))."""
    folder.mkdir(parents=True, exist_ok=True)
    mapping = {}
    for project, (base, entries) in EXTERNAL.items():
        entries = {**entries, **{alias: entries[full] for alias, full in ALIASES.items() if full in entries}}
        path = folder / f"{project}.inv"
        data = inventory_bytes(project, entries)
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        mapping[project] = (base, str(path))
    return mapping
