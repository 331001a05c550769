"""A wheel that works: ``python -m build`` makes an sdist and a wheel that ``twine check``
passes, and the wheel, installed into a fresh virtual environment outside the checkout, runs
``highway --version``, the tiny demo and the README's Python example.

The fresh environment gets the dependencies (torch, ...) of the environment running the tests
without installing them again (minutes, and the network): a ``.pth`` file names that
environment's site-packages. A path line of a ``.pth`` file adds the folder to ``sys.path``
but does not run the ``.pth`` files inside it, so the editable install of the checkout that
lives there (``__editable__.*.pth``) stays inactive; the test proves that the package is
imported from the fresh environment.

The build runs on a copy of the checkout (it writes ``build/`` and ``*.egg-info`` where it
runs) with ``--no-isolation`` (offline: setuptools comes from the ``dev`` extra), in
``python -m build``'s default order: the sdist, then the wheel built from the sdist, which
proves the sdist holds what a build needs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

import highway_transformer

pytest.importorskip("build")
pytest.importorskip("twine")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "highway_transformer"
#: Not copied for the build: version control, environments and what builds and runs leave.
NOT_COPIED = (".git", ".venv", "build", "dist", "runs", "*.egg-info", "__pycache__",
              ".pytest_cache", ".ruff_cache")  # fmt: skip
#: Top-level folders of the checkout that must stay out of the wheel.
NOT_IN_WHEEL = ("tests", "results", "benchmarks", "docs", "docs_hooks")


def run(argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300):
    """Run a command (by default in this environment less PYTHONPATH, which may name the
    checkout); fail the test with its output's tail when it fails."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-2000:]}\n" \
                                 f"{done.stderr[-2000:]}"  # fmt: skip
    return done


def clean_env(fresh: Path) -> dict[str, str]:
    """The environment a user of the fresh venv has: its ``bin`` first on PATH, no
    PYTHONPATH, one thread (the suite shares its cores: several threads a process on busy
    cores turn the demo's seconds into minutes)."""
    env = {"PATH": f"{fresh / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
    for name in ("HOME", "TMPDIR", "LANG", "LC_ALL"):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONIOENCODING="utf-8")
    return env


def readme_python_example() -> str:
    """The README's Python example (its one ```python block), verbatim."""
    found = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text("utf-8"), re.S)
    assert len(found) == 1, "README.md should have one Python example"
    return found[0]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` of a copy of the checkout: the folder with its sdist and wheel."""
    source = tmp_path_factory.mktemp("source") / "highway-transformer"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_COPIED))
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source], cwd=out)
    return out


def the_wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("highway_transformer-*.whl")
    return wheel


def test_build_makes_an_sdist_and_a_wheel_that_twine_passes(dist: Path) -> None:
    version = highway_transformer.__version__
    (sdist,) = dist.glob("*.tar.gz")
    assert sdist.name == f"highway_transformer-{version}.tar.gz"
    assert the_wheel(dist).name == f"highway_transformer-{version}-py3-none-any.whl"
    done = run([sys.executable, "-m", "twine", "check", "--strict", sdist, the_wheel(dist)], dist)
    assert done.stdout.count("PASSED") == 2


def test_the_wheel_holds_the_package_and_nothing_else(dist: Path) -> None:
    with zipfile.ZipFile(the_wheel(dist)) as wheel:
        names = set(wheel.namelist())
    version = highway_transformer.__version__
    info = f"highway_transformer-{version}.dist-info"
    packaged = {n for n in names if not n.startswith(f"{info}/")}
    source = {
        p.relative_to(PACKAGE.parent).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert packaged == source  # every module and data file, and no other file
    assert "highway_transformer/py.typed" in packaged
    assert "highway_transformer/presets/__init__.py" in packaged
    # package data the pyproject declares (presets/*.yaml) is in it, where the source has any
    yaml = {s for s in source if re.fullmatch(r"highway_transformer/presets/[^/]+\.yaml", s)}
    assert yaml <= packaged
    tops = {n.split("/")[0] for n in names}
    assert tops == {"highway_transformer", info}
    assert not tops & set(NOT_IN_WHEEL)
    assert f"{info}/licenses/LICENSE" in names and f"{info}/entry_points.txt" in names


def test_the_sdist_holds_what_a_build_needs(dist: Path) -> None:
    import tarfile

    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= names
    assert "src/highway_transformer/py.typed" in names
    assert not any(n.startswith(("results/", "benchmarks/", "runs/")) for n in names)


@pytest.fixture(scope="module")
def fresh(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the checkout with the wheel installed and the dependencies of
    this environment visible through a ``.pth`` file."""
    fresh = tmp_path_factory.mktemp("venv") / "fresh"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                  fresh).stdout.strip()  # fmt: skip
    ours = dict.fromkeys(sysconfig.get_path(k) for k in ("purelib", "platlib"))
    (Path(purelib) / "highway_dependencies.pth").write_text("\n".join(ours) + "\n", "utf-8")
    # the dependencies are seen, the checkout's editable install is not
    code = "import importlib.util as u; print(u.find_spec('torch') is not None, " \
           "u.find_spec('highway_transformer'))"  # fmt: skip
    assert run([python, "-c", code], fresh, clean_env(fresh)).stdout.split() == ["True", "None"]
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "--no-cache-dir", "--quiet", the_wheel(dist)], fresh)  # fmt: skip
    return fresh


def editable_paths() -> set[str]:
    """What the ``.pth`` files of this environment's editable installs would add to
    ``sys.path`` (path lines) or import (finder modules named on ``import`` lines)."""
    found: set[str] = set()
    for folder in {sysconfig.get_path(k) for k in ("purelib", "platlib")}:
        for pth in Path(folder).glob("__editable__*.pth"):
            for line in pth.read_text("utf-8").splitlines():
                words = line.replace(";", " ").split()
                if line.startswith("import"):
                    found |= {w for w in words if w.startswith("__editable__")}
                elif line.strip():
                    found.add(line.strip())
    return found


def test_the_fresh_venv_imports_the_installed_wheel_not_the_checkout(
    fresh: Path, tmp_path: Path
) -> None:
    assert (fresh / "bin" / "highway").is_file()
    code = "import json, sys, highway_transformer, torch; print(json.dumps([" \
           "highway_transformer.__file__, sys.path, sorted(sys.modules)]))"  # fmt: skip
    done = run([fresh / "bin" / "python", "-c", code], tmp_path, clean_env(fresh))
    imported, path, modules = json.loads(done.stdout)
    assert Path(imported).resolve().is_relative_to(fresh.resolve())
    assert not Path(imported).resolve().is_relative_to(ROOT)
    # the dependencies' site-packages may lie in the checkout (make's .venv), its sources not
    assert not any(Path(p).resolve().is_relative_to(ROOT / "src") for p in path if p)
    assert str(ROOT) not in path  # "" is the current folder, outside the checkout
    # the editable install beside the dependencies stays inactive (where there is one)
    assert not editable_paths() & (set(path) | set(modules))


def test_the_installed_command_and_readme_example_run_outside_the_checkout(
    fresh: Path, tmp_path: Path
) -> None:
    env = clean_env(fresh)
    highway = fresh / "bin" / "highway"
    assert str(fresh / "bin" / "python") in highway.read_text("utf-8")  # its interpreter
    done = run([highway, "--version"], tmp_path, env)
    assert highway_transformer.__version__ in done.stdout
    argv = [highway, "demo", "--tiny", "--steps", "2", "--seeds", "1", "--jobs", "1",
            "--no-progress", "--out", "demo"]  # fmt: skip
    done = run(argv, tmp_path, env)
    assert "report written to demo/report.md" in done.stdout
    assert (tmp_path / "demo" / "report" / "index.md").is_file()
    assert (tmp_path / "demo" / "ab" / "none" / "sdu-tanh" / "seed1" / "results.json").is_file()
    example = tmp_path / "example"
    example.mkdir()
    (example / "readme_example.py").write_text(readme_python_example(), "utf-8")
    run([fresh / "bin" / "python", "readme_example.py"], example, env)
    assert (example / "runs" / "my-model" / "model.safetensors").is_file()
