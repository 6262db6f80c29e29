"""The package's layers (docs/architecture.md, "Layers"): a module imports only from its
own layer or lower ones, lazy imports inside functions counted, and the suite table's
import strings counted as imports of ``carebench.suites``."""

from __future__ import annotations

from test_import_structure import _imports, _modules

#: low to high; a module belongs to the layer of its longest matching prefix (under carebench.)
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"", "types", "stats", "fileio", "jsonclean", "wording", "cores", "templates", "taxonomy",
                    "taxonomy_schema", "prompts", "cli_params", "listen_socket", "system_names"}),
    ("data", {"datasets", "records_parquet", "engine.rundir", "report", "batch.options", "batch.manifest",
              "resources", "rubric", "rubric_walk", "engine"}),
    ("models", {"models", "engine.cache"}),
    ("calls", {"engine.runner", "batch"}),
    ("run", {"engine.run", "engine.options"}),
    ("skeleton", {"engine.skeleton", "engine.planning", "judging", "criteria", "engagement"}),
    ("tools", {"compare", "view", "inspect"}),
    ("suites", {"risk", "support", "plural", "construct", "converse", "annotate"}),
    ("application", {"suites", "cli", "demo", "batch.cli", "resources.cli", "__main__", "_registry",
                     "inspect.cli"}),
]


def layer_of(module: str) -> int:
    rest = module.removeprefix("carebench").removeprefix(".")
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            matches = rest == p or (p and rest.startswith(p + "."))
            if matches and (best is None or len(p) > best[0]):
                best = (len(p), i)
    assert best is not None, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return best[1]


def test_the_layer_lookup():
    names = [n for n, _ in LAYERS]
    assert names[layer_of("carebench.batch.cli")] == "application"
    assert names[layer_of("carebench.batch.export")] == "calls"
    assert names[layer_of("carebench.batch.options")] == "data"
    assert names[layer_of("carebench")] == "foundation"
    assert names[layer_of("carebench.engine.runner")] == "calls" and names[layer_of("carebench.engine.run")] == "run"


def test_every_module_has_a_layer():
    for module in _modules():
        layer_of(module)


def test_no_import_from_a_lower_layer_to_a_higher_one():
    every, _ = _imports()
    names = [n for n, _ in LAYERS]
    upward = sorted(f"{m} ({names[layer_of(m)]}) imports {t} ({names[layer_of(t)]})"
                    for m, ts in every.items() for t in ts if layer_of(t) > layer_of(m))
    assert upward == []
