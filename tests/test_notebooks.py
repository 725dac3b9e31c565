"""Execute every notebook under notebooks/ and keep them clean: no stored outputs, no machine paths.

Notebooks run from an in-memory copy (nothing is written back) in a kernel on this interpreter, with the
working directory set to notebooks/ so they find ``shared/data`` by walking up, as a user's Jupyter would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL = "convrag-test"
# Home folders, temp folders, this checkout's parents, Windows drives: none belongs in a committed notebook.
MACHINE_PATH = re.compile(r"(?<![\w.])(?:/(?:home|Users|root|tmp|work|private|var/folders|mnt)/|[A-Za-z]:\\\\)")


def test_the_notebooks_are_found():
    assert {"01_quick_start.ipynb", "02_response_modes.ipynb", "03_retrieval_experiments.ipynb",
            "04_conversational_retrieval.ipynb"} <= {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_clean(path):
    raw = path.read_text(encoding="utf-8")
    notebook = json.loads(raw)
    dirty = [i for i, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert dirty == [], f"{path.name}: cells {dirty} hold outputs; clear them before committing"
    found = MACHINE_PATH.findall(raw)
    assert found == [], f"{path.name}: absolute machine paths {found}"


def test_the_path_check_catches_machine_paths():
    assert MACHINE_PATH.findall('"/home/ann/x.db" and "C:\\\\Users\\\\x"') == ["/home/", "C:\\\\"]
    assert MACHINE_PATH.findall('Path.cwd() / "shared" / "data", "https://x.org/tmp/"') == []


@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
    """A kernelspec for this interpreter in a temp Jupyter path, importing the checkout without installing it."""
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    python_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "convrag test", "language": "python",
        "env": {"PYTHONPATH": python_path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "PYTHONWARNINGS": "ignore"},
    }), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    return KERNEL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, kernel_name, tmp_path, shared_data):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    before = sorted(p.name for p in NOTEBOOK_DIR.iterdir())
    committed = path.read_bytes()
    client = nbclient.NotebookClient(notebook, timeout=240, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()
    errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
    assert any(o.get("output_type") == "stream" for cell in notebook.cells for o in cell.get("outputs", []))
    assert sorted(p.name for p in NOTEBOOK_DIR.iterdir()) == before  # the notebook wrote into its temp folder
    assert path.read_bytes() == committed  # outputs stayed in the in-memory copy
