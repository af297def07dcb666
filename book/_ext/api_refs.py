"""Sphinx extension: the API page's cross-references from attnlib's docstrings go where a reader can follow them.

The appendix documents every public name once, under the name a reader imports (``attnlib.<name>``,
``attnlib.book.<name>``), while the docstrings name objects where they are defined
(``:func:`~attnlib.theory.branches.pooled_end.agreement_end```) or by their short name inside their own module.
Sphinx resolves neither to the public entry, and a reference to an internal helper has no entry at all: both would
show as code that links nowhere. On ``missing-reference`` of the Python domain this extension

* links a reference to the public entry of the same object (its short name is in ``attnlib.__all__`` or
  ``attnlib.book.__all__``, and the target, where it can be imported, is that very object);
* shows a reference to an object that exists but has no entry (an internal helper, a module, a name of numpy or
  joblib) as plain code, not as a cross-reference (an internal ``attnlib`` path by its last name only);
* leaves every other reference unresolved (a misspelt or removed name), so that the book's tests still find it.
"""
from __future__ import annotations

import importlib
import sys

from docutils import nodes
from sphinx.application import Sphinx

PUBLIC = ("attnlib", "attnlib.book")
_MISSING = object()


def lookup(target: str, modname: str | None = None):
    """The object that the dotted ``target`` names, absolutely or inside ``modname``, or a short name defined in
    one of attnlib's modules (a docstring names its module's objects by their short names); ``_MISSING`` if
    none."""
    found = _lookup_dotted(target, modname)
    if found is _MISSING and "." not in target:
        hits = {id(vars(m)[target]): vars(m)[target] for name, m in list(sys.modules.items())
                if name.startswith("attnlib.") and m is not None and target in vars(m)}
        if len(hits) == 1:
            found = next(iter(hits.values()))
    return found


def _lookup_dotted(target: str, modname: str | None):
    for full in (target, f"{modname}.{target}" if modname else None):
        if not full:
            continue
        parts = full.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for part in parts[i:]:
                    obj = getattr(obj, part)
            except AttributeError:
                break
            return obj
    return _MISSING


def public_name(target: str, found) -> str | None:
    """``attnlib.<name>`` or ``attnlib.book.<name>`` where ``target`` names a public object (``found``, what
    :func:`lookup` finds for it, is that object or ``_MISSING``), else None."""
    short = target.rsplit(".", 1)[-1]
    for space in PUBLIC:
        module = importlib.import_module(space)
        if short in getattr(module, "__all__", ()):
            obj = getattr(module, short)
            if found is _MISSING or found is obj:
                return f"{space}.{short}"
    return None


def missing_reference(app: Sphinx, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    found = lookup(target, node.get("py:module"))
    name = public_name(target, found)
    if name is not None and name != target:
        domain = env.get_domain("py")
        resolved = domain.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode)
        if resolved is not None:
            return resolved
    if found is not _MISSING:
        text = contnode.astext()
        if text.startswith("attnlib."):          # an internal path: a reader cannot import it, its name suffices
            text = text.rsplit(".", 1)[-1]
        return nodes.literal(text, text)
    return None


def setup(app: Sphinx) -> dict:
    app.connect("missing-reference", missing_reference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
