"""The tree as checked out is the tree as imported: every import inside the package is relative
and resolves to a file of the tree, the floors are kept (`plumbing/` imports neither `engine/`
nor `server/`, `engine/` never imports `server/`, and inside `server/` no import runs back up to
the command line, the application or the process runner), and the import graph drawn from the
files has no cycle (every import statement counts: top-level, inside a function, under
TYPE_CHECKING)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOPS = ("plumbing", "engine", "server")


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for top in TOPS:
        for path in (REPO / top).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


MODULES = _modules()


def _imports(name: str) -> list[tuple[int, str | None, list[str], int]]:
    """(line, module, names, level) of every `from ... import` and `import` in a module."""
    path, _ = MODULES[name]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            out.append((node.lineno, node.module, [a.name for a in node.names], node.level))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, [], 0) for a in node.names]
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, (_, package) in MODULES.items():
        here = name.split(".") if package else name.split(".")[:-1]
        for _, module, names, level in _imports(name):
            if not level:
                continue
            base = here[: len(here) - (level - 1)] + (module.split(".") if module else [])
            targets = [".".join([*base, n]) for n in names if ".".join([*base, n]) in MODULES]
            if len(targets) < len(names) and ".".join(base) in MODULES:
                targets.append(".".join(base))
            graph[name].update(t for t in targets if t != name)
    return graph


def test_the_package_imports_itself_relatively_and_every_import_is_a_file_of_the_tree():
    wrong = []
    for name in MODULES:
        for line, module, names, level in _imports(name):
            absolute = not level and (module or "").split(".")[0] == "hookwise"
            if absolute and (module != "hookwise" or names != ["__version__"]):  # the root's
                wrong.append(f"{name}:{line}: absolute import of {module}")
            if level:
                here = name.split(".") if MODULES[name][1] else name.split(".")[:-1]
                base = here[: len(here) - (level - 1)]
                if level - 1 > len(here):
                    wrong.append(f"{name}:{line}: relative import above the tree")
                    continue
                target = ".".join([*base, *(module.split(".") if module else [])])
                if not base:  # `from .. import __version__`: the namespace's root (hookwise/)
                    continue
                if target not in MODULES and not all(f"{target}.{n}" in MODULES for n in names):
                    wrong.append(f"{name}:{line}: {'.' * level}{module or ''} is not in the tree")
    assert wrong == []


def test_engine_never_imports_server():
    graph = _graph()
    back = sorted(
        f"{m} -> {t}"
        for m in graph
        if m.startswith("engine")
        for t in graph[m]
        if t.startswith("server")
    )
    assert back == []


def test_plumbing_imports_neither_engine_nor_server():
    graph = _graph()
    assert {m for m in graph if m.startswith("plumbing")} >= {
        "plumbing.backoff",
        "plumbing.children",
    }
    up = sorted(
        f"{m} -> {t}"
        for m in graph
        if m.startswith("plumbing")
        for t in graph[m]
        if not t.startswith("plumbing")
    )
    assert up == []


#: the top floors of `server/`, each with the only modules that may import it: the command line
#: (nothing outside it), the application (the command line), the process runner (the command
#: line; it is handed the application's factory rather than importing it)
TOP_FLOORS = {
    "server.cli": ("server.cli",),
    "server.app": ("server.cli",),
    "server.lifecycle.serve": ("server.cli",),
}


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_no_import_runs_back_up_to_the_top_floors_of_server():
    graph = _graph()
    back = sorted(
        f"{m} -> {t}"
        for m in graph
        for t in graph[m]
        for floor, allowed in TOP_FLOORS.items()
        if _within(t, floor) and not _within(m, floor) and not any(_within(m, a) for a in allowed)
    )
    assert back == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("server.lifecycle.serve", "server.app"),
        ("server.lifecycle.serve", "server.cli.args"),
        ("server.gmail.cli", "server.cli.args"),
    ],
)
def test_the_arrows_that_once_ran_back_up_are_gone(importer: str, imported: str):
    graph = _graph()
    assert importer in graph and imported in MODULES  # still there to be checked
    assert imported not in graph[importer]


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    assert sum(len(targets) for targets in graph.values()) > 400  # the graph was drawn at all
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_import_of_the_projects_own_modules_is_silenced():
    """A module of the tree that fails to import is a defect to see: no relative import sits in
    a `try` whose `except` catches `ImportError` (the CLI once dropped whole commands that way)."""
    caught = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
    wrong = []
    for name, (path, _) in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Try):
                continue
            names = set()
            for handler in node.handlers:
                kinds = handler.type
                found = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                names |= {k.id for k in found if isinstance(k, ast.Name)}
                if kinds is None:
                    names.add("BaseException")
            if not names & caught:
                continue
            for stmt in node.body:
                for inner in ast.walk(stmt):
                    if isinstance(inner, ast.ImportFrom) and inner.level:
                        wrong.append(f"{name}:{inner.lineno}: {'.' * inner.level}{inner.module}")
    assert wrong == []


#: the hook path's stages, in the order a request walks them (`server/ingress/hooks.py`)
STAGES = (
    "server.ingress.door",
    "server.ingress.body",
    "engine.judge",
    "server.ingress.accept",
    "server.ingress.answer",
)


def test_the_hook_path_s_stages_import_no_stage_before_them_and_only_the_walker_knows_them_all():
    graph = _graph()
    assert all(stage in graph for stage in STAGES)  # the stages are modules of the tree
    back = sorted(
        f"{later} -> {earlier}"
        for i, later in enumerate(STAGES)
        for earlier in STAGES[:i]
        if earlier in _reachable(graph, later)
    )
    assert back == []
    # the walker imports the stages; no stage (nor anything under one) imports the walker
    assert {s for s in STAGES if not s.startswith("engine")} <= graph["server.ingress.hooks"]
    assert not [s for s in STAGES if "server.ingress.hooks" in _reachable(graph, s)]
    # the judge is pure: nothing it reaches is a server module
    assert not [m for m in _reachable(graph, "engine.judge") if m.startswith("server")]


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_every_commit_of_a_judged_request_goes_through_the_accept_stage():
    """Live, replayed and pulled requests are accepted alike: `Dispatcher.dispatch` (the commit)
    is called by the accept stage alone (`AcceptStage.commit`), never by replay or a source."""
    callers = sorted(
        name
        for name, (path, _) in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "dispatch"
    )
    assert callers == ["server.ingress.accept"]
