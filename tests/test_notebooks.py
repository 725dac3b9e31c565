"""Execute every notebook under notebooks/ and keep them clean: no stored outputs, no machine paths.

Notebooks run from an in-memory copy (nothing is written back) in a kernel on this interpreter, with the
working directory set to notebooks/ so they find ``shared/data`` by walking up, as a user's Jupyter would.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest

from llama_index_convrag.embeddings.model_files import default_cache_dir

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


def kernel_env(home: Path) -> Dict[str, str]:
    """A kernel's environment with its own HOME: Milvus Lite keeps its scratch files in ``$HOME/.cache/milvus`` and
    a server that exits deletes that folder, so processes starting and stopping servers side by side with one HOME
    (the xdist workers, other kernels) fail now and then ("create dir:/root/.cache/milvus failed"). matplotlib keeps the real configuration folder, and the
    local model its real cache of converted graphs (else each kernel builds the fused graph again)."""
    home.mkdir(parents=True, exist_ok=True)
    mpl = os.environ.get("MPLCONFIGDIR", str(Path.home() / ".config" / "matplotlib"))
    models = str(default_cache_dir().parent)
    return {**os.environ, "HOME": str(home), "MPLCONFIGDIR": mpl, "CONVRAG_CACHE_DIR": models}


def test_notebooks_execute(kernel_name, tmp_path, shared_data, ranx_compiled):
    """All notebooks in one kernel, one after the other, each from an empty namespace (``%reset -f`` first, as a new
    kernel would give it): a kernel's imports and model load (about 10 CPU-s) are paid once instead of per notebook."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from jupyter_client.manager import AsyncKernelManager

    before = sorted(p.name for p in NOTEBOOK_DIR.iterdir())
    committed = {path: path.read_bytes() for path in NOTEBOOKS}
    notebooks = {}
    for path in NOTEBOOKS:
        shutil.copyfile(path, tmp_path / path.name)
        notebooks[path.name] = nbformat.read(tmp_path / path.name, as_version=4)

    async def run_all() -> Dict[str, BaseException]:
        km = AsyncKernelManager(kernel_name=kernel_name)
        await km.start_kernel(cwd=str(NOTEBOOK_DIR), env=kernel_env(tmp_path / "home"))
        failures: Dict[str, BaseException] = {}
        try:
            for name, nb in notebooks.items():
                nb.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))
                client = nbclient.NotebookClient(nb, km=km, timeout=240, kernel_name=kernel_name)
                try:
                    await client.async_execute()
                except Exception as exc:  # noqa: BLE001 - reported per notebook below; the next one still runs
                    failures[name] = exc
                finally:
                    if client.kc is not None:
                        client.kc.stop_channels()
        finally:
            await km.shutdown_kernel(now=True)
        return failures

    failures = {name: str(exc)[-2000:] for name, exc in asyncio.run(run_all()).items()}
    assert failures == {}
    for name, nb in notebooks.items():
        assert nb.cells[0].source == "%reset -f" and nb.cells[0].get("outputs") == [], name
        outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
        assert [o for o in outputs if o.get("output_type") == "error"] == [], name
        assert any(o.get("output_type") == "stream" for o in outputs), name
    assert sorted(p.name for p in NOTEBOOK_DIR.iterdir()) == before  # the notebooks wrote into temp folders
    assert {path: path.read_bytes() for path in NOTEBOOKS} == committed  # outputs stayed in the in-memory copies
