"""A static check that ember's array code only reaches what CuPy has.

Op forwards, kernels and layers are written against an array namespace ``xp`` (NumPy on the
CPU, CuPy on a GPU). NumPy has far more than CuPy (and keywords CuPy's functions lack), so a
name that works on the CPU can fail only on a GPU. This parses ember's sources, collects the
attribute chains reached from ``xp`` (``xp.foo``, ``xp.linalg.foo``,
``xp.lib.stride_tricks.foo``), from ``special_of(..)`` (cupyx.scipy.special) and from
``fft_of(..)`` (cupy.fft), and the keywords passed to them, and checks each against the real
CuPy. It needs CuPy importable (no GPU or driver); the NumPy stand-in of EMBER_FAKE_CUDA is
not CuPy, so the test skips under it. Without CuPy in the test environment, run it with
CuPy's packages on the path:

    PYTHONPATH=$PWD/src:$PWD:/tmp/cupyenv/lib/python3.11/site-packages \\
        python -m pytest tests/gpu/test_cupy_names.py
"""

import ast
import functools
import importlib
import inspect
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "ember"

# backend/ knows which library it holds and calls it by name; everything else gets xp
SKIP_DIRS = ("backend",)

# Where an ``xp`` chain is reached only with NumPy, the name is allowed here, with the
# reason. Keys: (path under src/ember, dotted name as written).
NUMPY_ONLY = {
}

# Names CuPy lacks in modules that other sessions own, reported to them: each fails on a GPU
# today. Remove an entry with its fix (test_pending_gaps_are_still_gaps then says so).
PENDING = {}

# the namespaces that stand for a CuPy module, and the module they stand for
NAMESPACE_OF_CALL = {"special_of": "cupyx.scipy.special", "fft_of": "cupy.fft"}


def _sources():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] not in SKIP_DIRS:
            yield rel.as_posix(), ast.parse(path.read_text(), str(path))


def _root_of_call(node):
    """The CuPy module a call such as ``special_of(xp)`` stands for, else None."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return NAMESPACE_OF_CALL.get(name)
    return None


def _aliases(tree):
    """Names bound to ``special_of(..)`` or ``fft_of(..)`` anywhere in a module."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            module = _root_of_call(node.value)
            if module:
                found[node.targets[0].id] = module
    return found


def _chain(node, aliases):
    """(module, [attr, ...]) for an attribute chain on a CuPy namespace, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "xp":
        module = "cupy"
    elif isinstance(node, ast.Name) and node.id in aliases:
        module = aliases[node.id]
    else:
        module = _root_of_call(node)
    return (module, parts[::-1]) if module and parts else None


def _getattr_names(node):
    """The constant names of ``getattr(ns, "a" if c else "b")``."""
    arg = node.args[1] if len(node.args) > 1 else None
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.IfExp):
        return [v.value for v in (arg.body, arg.orelse)
                if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


def _factories(trees):
    """Functions that look a name up on a namespace from one of their parameters
    (``def _scipy(name): ... getattr(special_of(xp), name)``): {function name: [(parameter
    position, parameter name, module, [attrs before the name])]}."""
    found = {}

    def visit(node, params):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            name = getattr(node, "name", None)
            own = [a.arg for a in node.args.args] + [None] * 99 + \
                [a.arg for a in node.args.kwonlyargs]           # keyword-only: no position
            params = {**params, **{p: (name, i) for i, p in enumerate(own) if name and p}}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "getattr" and len(node.args) > 1 \
                and isinstance(node.args[1], ast.Name) and node.args[1].id in params:
            base = _chain(ast.Attribute(value=node.args[0], attr="_"), aliases)
            if base:
                function, position = params[node.args[1].id]
                found.setdefault(function, []).append(
                    (position, node.args[1].id, base[0], base[1][:-1]))
        for child in ast.iter_child_nodes(node):
            visit(child, params)

    for _, tree in trees:
        aliases = _aliases(tree)
        visit(tree, {})
    return found


def _factory_uses(path, tree, factories):
    """The names that calls such as ``_scipy("k1e")`` make their factory look up."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.id if isinstance(node.func, ast.Name) else \
            getattr(node.func, "attr", None)
        for position, param, module, parts in factories.get(func, ()):
            given = [k.value for k in node.keywords if k.arg == param]
            if position < len(node.args):
                given.append(node.args[position])
            for arg in given:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield path, node.lineno, module, parts + [arg.value], []


@functools.cache
def uses():
    """Every (path, line, module, [attrs], keywords) that reaches a CuPy namespace."""
    found = []
    trees = list(_sources())
    factories = _factories(trees)
    for path, tree in trees:
        found.extend(_factory_uses(path, tree, factories))
        aliases = _aliases(tree)
        called = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called[id(node.func)] = [k.arg for k in node.keywords if k.arg]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain = _chain(node, aliases)
                if chain:
                    found.append((path, node.lineno, *chain, called.get(id(node), [])))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "getattr" and node.args:
                base = _chain(ast.Attribute(value=node.args[0], attr="_"), aliases)
                for name in _getattr_names(node):
                    if base:
                        found.append((path, node.lineno, base[0], base[1][:-1] + [name], []))
    return found


def _keywords(fn):
    """The keyword names ``fn`` accepts (None: any, or its signature is not readable)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}


@functools.cache
def missing():
    """(path:line, dotted name, what is missing) for each use CuPy cannot serve."""
    modules = {}
    problems = []
    for path, line, module, parts, keywords in uses():
        dotted = ".".join(parts)
        if (path, dotted) in NUMPY_ONLY:
            continue
        obj = modules.setdefault(module, importlib.import_module(module))
        for i, part in enumerate(parts):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                problems.append((f"{path}:{line}", dotted,
                                 f"{module}.{'.'.join(parts[:i + 1])} does not exist"))
                break
            except ImportError:         # a submodule that needs CUDA libraries to load
                obj = None
                break
        else:
            accepted = _keywords(obj)
            bad = [k for k in keywords if accepted is not None and k not in accepted]
            if bad:
                problems.append((f"{path}:{line}", dotted,
                                 f"{module}.{dotted} takes no keyword {', '.join(bad)}"))
    return tuple(sorted(set(problems)))


def _real_cupy():
    cupy = pytest.importorskip("cupy")
    if getattr(cupy, "__version__", "fake") == "fake":
        pytest.skip("EMBER_FAKE_CUDA's stand-in is not CuPy")
    pytest.importorskip("cupyx.scipy.special")


def test_collector_sees_the_namespaces():
    """The collector finds what it must check (a parse that finds nothing checks nothing)."""
    found = {(module, ".".join(parts)) for _, _, module, parts, _ in uses()}
    for expected in [("cupy", "linalg.svd"), ("cupy", "lib.stride_tricks.as_strided"),
                     ("cupyx.scipy.special", "erfinv"), ("cupyx.scipy.special", "k1e"),
                     ("cupy", "cumsum"), ("cupy", "fmax"), ("cupy", "exp"),
                     ("cupy.fft", "fft")]:
        assert expected in found, expected


def test_allowlist_entries_are_used():
    seen = {(path, ".".join(parts)) for path, _, _, parts, _ in uses()}
    assert not set(NUMPY_ONLY) - seen, "stale NUMPY_ONLY entries"


def test_every_name_exists_in_cupy():
    _real_cupy()
    problems = [p for p in missing() if (p[0].split(":")[0], p[1]) not in PENDING]
    assert not problems, "names CuPy lacks:\n" + "\n".join(
        f"  {where}: {name}: {why}" for where, name, why in problems)


def test_pending_gaps_are_still_gaps():
    _real_cupy()
    gaps = {(where.split(":")[0], name) for where, name, _ in missing()}
    assert not set(PENDING) - gaps, "fixed: remove from PENDING"


if __name__ == "__main__":          # the findings as a list, for a report
    for where, name, why in missing():
        print(f"{where}: {name}: {why}")
