"""Telemetry has one home: every sampler (a class with `sample`) and every energy counter (`energy_joules`) of the
package lives in samplers/, the Sampler and EnergyCounter protocols are defined there once, each sampler
has the protocol's start and stop, and the vendor modules are imported there inside functions only."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "bridgetower_mlflow"
HOME = PACKAGE / "samplers"
SAMPLER_METHODS = ("sample", "energy_joules")  # what makes a class a sampler or an energy counter
VENDOR_MODULES = ("pynvml", "pyhlml")


def sampler_classes(root: Path) -> dict[str, list[str]]:
    """{module path relative to `root`'s parent: [class names]} of the classes under `root` that define a
    method named in SAMPLER_METHODS (Protocols included)."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(_is_sampler_method(item) for item in node.body):
                found.setdefault(str(path.relative_to(root.parent)), []).append(node.name)
    return found


def _is_sampler_method(node: ast.stmt) -> bool:
    """A method named in SAMPLER_METHODS; a property of that name is a field (findings.Observed.energy_joules)."""
    return (isinstance(node, ast.FunctionDef) and node.name in SAMPLER_METHODS
            and not any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list))


def outside_home(root: Path, home: Path) -> dict[str, list[str]]:
    """The sampler classes of `root` that are not under `home`."""
    prefix = str(home.relative_to(root.parent)) + "/"
    return {path: names for path, names in sampler_classes(root).items() if not path.startswith(prefix)}


def test_every_sampler_lives_in_samplers():
    assert outside_home(PACKAGE, HOME) == {}


def test_the_scan_finds_a_sampler_added_elsewhere(tmp_path):
    """The rule above cannot pass vacuously: a sampler written outside the home is named, and so is an energy
    counter, while those of the home are not."""
    package = tmp_path / "bridgetower_mlflow"
    (package / "samplers").mkdir(parents=True)
    (package / "accelerators").mkdir()
    (package / "samplers" / "ok.py").write_text("class Fine:\n    def sample(self):\n        return {}\n")
    (package / "accelerators" / "stray.py").write_text(
        "class Stray:\n    def sample(self):\n        return {}\n\n"
        "class Meter:\n    def energy_joules(self):\n        return 0.0\n")
    assert outside_home(package, package / "samplers") == {
        "bridgetower_mlflow/accelerators/stray.py": ["Stray", "Meter"]}


def test_the_protocols_are_defined_once():
    found = sampler_classes(PACKAGE)
    protocols = {path: [n for n in names if n in ("Sampler", "EnergyCounter")] for path, names in found.items()}
    assert {path: names for path, names in protocols.items() if names} == {
        "bridgetower_mlflow/samplers/protocol.py": ["Sampler", "EnergyCounter"]}


def test_every_sampler_has_start_and_stop():
    """The monitor calls start before the first sample and stop after the last, on every sampler alike."""
    missing = []
    for path, names in sampler_classes(PACKAGE).items():
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        for name in names:
            cls = getattr(module, name)
            if hasattr(cls, "sample") and not (callable(getattr(cls, "start", None))
                                               and callable(getattr(cls, "stop", None))):
                missing.append(f"{path}:{name}")
    assert missing == []


def _vendor_imports(nodes) -> list[str]:
    names = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return [name for name in names if name.split(".")[0] in VENDOR_MODULES]


def test_vendor_modules_are_imported_inside_functions_only():
    """pynvml and pyhlml load when a sampler is built, never when its module is imported."""
    at_module_level, importers = [], set()
    for path in sorted(HOME.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        at_module_level += [f"{path.name}: {name}" for name in _vendor_imports(tree.body)]
        if _vendor_imports(ast.walk(tree)):
            importers.add(path.name)
    assert at_module_level == [] and importers == {"hlml.py", "nvml.py", "job_devices.py"}
