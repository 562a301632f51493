"""The layering design.md draws, read from the source (every import, lazy ones included):

- the wire-type modules (``api/<protocol>/protocol.py``) are pure data: nothing of ours;
- the answer-type modules (``api/<protocol>/wire.py``) are pure data too: only the shared ``api/wire.py``;
- no protocol package imports another protocol's;
- the engine knows no protocol: it imports neither ``tinytitan.api`` nor the HTTP or CLI stack.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tinytitan

ROOT = Path(tinytitan.__file__).parent
PROTOCOLS = ["anthropic", "chat_completions", "responses"]
ENGINE_MODULES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "engine").rglob("*.py"))
HTTP_AND_CLI = ("tinytitan.api", "tinytitan.cli", "litestar", "uvicorn", "typer")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_statements(path: Path) -> list[tuple[str, list[str]]]:
    """Every import in ``path`` as (module, names imported from it): ``import a.b`` is ("a.b", []),
    ``from .x import y`` is (its absolute name, ["y"])."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            found.append((".".join([*base, node.module] if node.module else base), [a.name for a in node.names]))
    return found


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved to their absolute names."""
    found: set[str] = set()
    for module, names in import_statements(path):
        found.add(module)
        found.update(f"{module}.{name}" for name in names)  # `from pkg import submodule`
    return found


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_imports_resolves_relative_imports() -> None:
    found = imports(ROOT / "api" / "anthropic" / "routes.py")
    assert "tinytitan.api.anthropic.protocol" in found  # `from .protocol import …`
    assert "tinytitan.api.streaming" in found


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_wire_types_import_nothing_of_ours(protocol: str) -> None:
    ours = sorted(m for m in imports(ROOT / "api" / protocol / "protocol.py") if within(m, "tinytitan"))
    assert ours == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_answer_types_import_only_the_shared_wire_module(protocol: str) -> None:
    """``wire.py`` (and ``wire_events.py``, the stream's events where they are apart): pure data."""
    own = f"tinytitan.api.{protocol}.wire"
    for path in sorted((ROOT / "api" / protocol).glob("wire*.py")):
        ours = sorted(m for m in imports(path) if within(m, "tinytitan"))
        assert all(within(m, "tinytitan.api.wire") or within(m, own) for m in ours), (path.name, ours)
    shared = sorted(m for m in imports(ROOT / "api" / "wire.py") if within(m, "tinytitan"))
    assert shared == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_protocol_package_imports_no_other_protocol(protocol: str) -> None:
    others = [f"tinytitan.api.{p}" for p in PROTOCOLS if p != protocol]
    for path in sorted((ROOT / "api" / protocol).rglob("*.py")):
        crossing = sorted(m for m in imports(path) if any(within(m, other) for other in others))
        assert crossing == [], path.name


@pytest.mark.parametrize("module", ENGINE_MODULES)
def test_the_engine_knows_no_protocol(module: str) -> None:
    crossing = sorted(m for m in imports(ROOT / module) if any(within(m, layer) for layer in HTTP_AND_CLI))
    assert crossing == []


# -- the engine by stage (issues 24 and 35): each stage imports only what lies below it -------------
# Bottom first. A module of one stage may import its own stage and any stage below, never one above;
# every import counts — at the top, inside a function (lazy), or under TYPE_CHECKING.
STAGE_ORDER: tuple[tuple[str, ...], ...] = (
    ("errors", "events", "readiness", "mlx_lm_adapter", "mlx_vlm_adapter"),  # the vocabulary every stage shares
    ("grammar",),  # grammars and the llguidance mask: from schemas, tool lists and token ids alone
    ("output",),  # generated text → events
    ("request",),  # ChatRequest, the validator, reasoning, routing, sampling and its defaults
    ("kv",),  # the KV cache's form and the quantized cache that batches
    ("prompt_cache",),  # KV snapshots by (model identity, token prefix), RAM and disk
    ("device",),  # the worker, the batches it steps, sampling, distributed stepping
    ("models",),  # backends: files, facts, loading, rendering; they open batches on the device
    ("memory", "tool_search", "loops", "queue", "cpu_pool", "inbox"),  # around one generation
    ("job",),  # one admitted generation
    ("service",),  # the Engine facade
    ("passes",),  # the server's own passes, through the Engine
    ("build",),  # the composition root: settings → backends → Engine
)
RANK = {stage: rank for rank, stages in enumerate(STAGE_ORDER) for stage in stages}
ABOVE_THE_STAGES = ("tinytitan.settings", "tinytitan.engine.build", "tinytitan.engine.service", "tinytitan.engine.job")


def stage_of(name: str) -> str:
    """``tinytitan.engine.device.worker`` → ``device``; ``tinytitan.engine.job`` → ``job``."""
    return name.split(".")[2]


def engine_modules(*packages: str) -> list[str]:
    return [m for m in ENGINE_MODULES if any(m.startswith(f"engine/{p}/") for p in packages)]


def test_every_engine_module_has_a_stage() -> None:
    stages = {stage_of(module_name(ROOT / m)) for m in ENGINE_MODULES if m != "engine/__init__.py"}
    assert sorted(stages - set(RANK)) == []


@pytest.mark.parametrize("module", [m for m in ENGINE_MODULES if m != "engine/__init__.py"])
def test_a_stage_imports_only_stages_below_it(module: str) -> None:
    rank = RANK[stage_of(module_name(ROOT / module))]
    found = {m for m in imports(ROOT / module) if within(m, "tinytitan.engine") and m != "tinytitan.engine"}
    above = sorted(m for m in found if RANK.get(stage_of(m), -1) > rank)
    assert above == []
    assert not any(within(m, "tinytitan.settings") for m in imports(ROOT / module)) or module == "engine/build.py"


MODULES = {module_name(p) for p in ROOT.rglob("*.py")}


def graph_imports(path: Path) -> set[str]:
    """Our modules ``path`` imports, as ``imports`` reads them, except that ``from pkg import sub`` (a
    submodule) counts as importing ``pkg.sub`` alone: the package is only the way in."""
    found: set[str] = set()
    for module, names in import_statements(path):
        submodules = [f"{module}.{name}" for name in names if f"{module}.{name}" in MODULES]
        found.update(submodules)
        if not names or len(submodules) < len(names):  # a name the module (or the package's __init__) defines
            found.add(module)
    return found & MODULES


def test_no_import_circles_in_the_engine() -> None:
    """Strongly connected components of the engine's import graph (every import counted)."""
    paths = {module_name(ROOT / m): ROOT / m for m in ENGINE_MODULES}
    graph = {name: sorted(graph_imports(path) & set(paths) - {name}) for name, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

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
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    assert circles == []


STAGES = ("models", "device", "grammar", "output", "prompt_cache", "kv")


@pytest.mark.parametrize("module", engine_modules(*STAGES))
def test_a_stage_knows_neither_the_composition_root_nor_the_engine(module: str) -> None:
    """The factory lives in ``engine/build.py``, above the models it builds."""
    crossing = sorted(m for m in imports(ROOT / module) if any(within(m, layer) for layer in ABOVE_THE_STAGES))
    assert crossing == []


@pytest.mark.parametrize("module", engine_modules("models", "grammar", "device", "output"))
def test_what_runs_a_request_never_reaches_into_the_validator(module: str) -> None:
    """Validation happens once, before a request reaches a model (its helpers live with the request types)."""
    crossing = sorted(m for m in imports(ROOT / module) if within(m, "tinytitan.engine.request.validate"))
    assert crossing == []


@pytest.mark.parametrize("module", engine_modules("memory"))
def test_the_memory_decorator_knows_neither_the_engine_nor_the_job(module: str) -> None:
    """Its rounds are handed to the Job (``Job(..., rounds=MemoryRounds(...))``), not a subclass of it."""
    crossing = sorted(m for m in imports(ROOT / module) if any(within(m, layer) for layer in ABOVE_THE_STAGES[2:]))
    assert crossing == []


def test_each_protocol_package_has_the_same_modules() -> None:
    """protocol (request types), wire (answer and event types), mapping (wire → ChatRequest), encode
    (events → wire), routes."""
    for protocol in PROTOCOLS:
        names = {p.stem for p in (ROOT / "api" / protocol).glob("*.py")}
        assert {"protocol", "wire", "mapping", "encode", "routes"} <= names, protocol
        assert "translate" not in names and "inputs" not in names, protocol
