"""The house rules of ARCHITECTURE.md that import-linter does not check: no import cycle among
the project's modules, counting imports made inside functions, and rooms of at most ~400 lines.
"""

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def packages() -> tuple[str, ...]:
    """The project's packages, as pyproject.toml lists them for setuptools: a new package is
    under these rules (and tests/test_tripwires.py's) once it is installed. import-linter's
    root_packages must be the same list, so its contracts see every package too."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    listed = tuple(config["setuptools"]["packages"])
    assert sorted(config["importlinter"]["root_packages"]) == sorted(listed), (
        "pyproject.toml: [tool.importlinter] root_packages and [tool.setuptools] packages differ"
    )
    return listed


PACKAGES = packages()
MAX_LINES = 400
# Exempt from the size rule: data declarations, not rooms of behaviour.
EXEMPT = ("models.py", "settings.py")
# Rooms still waiting for their split (issue 25), at their size when this list was written:
# each may shrink, none may grow, and a new room over the limit fails.
NOT_YET_SPLIT: dict[str, int] = {}


def modules() -> dict[str, Path]:
    """Every module of the project's packages (migrations aside), by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _late(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """An import Django's own hooks make late (AppConfig.ready), or one for type checkers."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef) and node.name == "ready":
            return True
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imported(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or _late(node, parents):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                if path.name != "__init__.py":
                    parts = parts[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


def cycles() -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    known = modules()
    graph = {m: set(_imported(m, p, known)) for m, p in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


class ArchitectureTestCase:
    def test_it_has_no_import_cycles(self) -> None:
        assert cycles() == []

    def test_it_checks_every_package_of_the_project(self) -> None:
        """Every directory that is a Python package at the root (the tests aside) is listed
        in pyproject.toml, so none slips past these rules or import-linter's."""
        found = {p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests"}
        assert found - set(PACKAGES) == set(), "add it to pyproject.toml's package lists"

    def test_it_finds_a_cycle_made_by_a_late_import(self, tmp_path: Path) -> None:
        """The check itself: an import inside a function closes a cycle it reports."""
        one, two = tmp_path / "one.py", tmp_path / "two.py"
        one.write_text("import two\n")
        two.write_text("def f():\n    import one\n")
        known = {"one": one, "two": two}
        assert list(_imported("two", two, known)) == ["one"]
        ready = tmp_path / "apps.py"
        ready.write_text("class C:\n    def ready(self):\n        import one\n")
        assert list(_imported("apps", ready, {**known, "apps": ready})) == []

    def test_its_rooms_stay_small(self) -> None:
        over = {}
        for name, path in modules().items():
            if path.name in EXEMPT:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > NOT_YET_SPLIT.get(name, MAX_LINES):
                over[name] = lines
        assert over == {}, f"modules over {MAX_LINES} lines (split them by domain noun): {over}"
