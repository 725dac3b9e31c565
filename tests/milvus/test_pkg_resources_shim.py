"""The ``pkg_resources`` stand-in for milvus-lite 2.5.1, exercised in a fresh interpreter where ``pkg_resources``
cannot be imported (a meta-path finder refuses it, as in an environment without setuptools)."""

import subprocess
import sys

import pytest

SCRIPT = r"""
import importlib.abc, sys
class NoPkgResources(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pkg_resources":
            raise ModuleNotFoundError("No module named 'pkg_resources'", name=name)
        return None
sys.meta_path.insert(0, NoPkgResources())
{body}
"""


def run(body: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(body=body)], capture_output=True, text=True,
                          timeout=120)


def test_without_pkg_resources_milvus_lite_2_5_fails_and_the_shim_lets_it_import():
    milvus_lite = pytest.importorskip("milvus_lite")
    import importlib.metadata

    if importlib.metadata.version("milvus-lite").split(".")[0] != "2":
        pytest.skip("milvus-lite 3.x does not import pkg_resources")
    bare = run("import milvus_lite")
    assert bare.returncode != 0 and "No module named 'pkg_resources'" in bare.stderr
    shimmed = run("from llama_index_convrag.milvus.pkg_resources_shim import ensure_pkg_resources\n"
                  "assert sys.modules['pkg_resources'].__doc__.startswith('importlib.metadata-backed')\n"
                  "assert ensure_pkg_resources() is False\n"
                  "import milvus_lite, importlib.metadata\n"
                  "assert milvus_lite.__version__ == importlib.metadata.version('milvus-lite'), milvus_lite.__version__\n"
                  "print('ok')")
    assert shimmed.returncode == 0, shimmed.stderr
    assert shimmed.stdout.strip() == "ok" and milvus_lite is not None


def test_a_real_pkg_resources_is_left_alone():
    got = run("sys.meta_path.pop(0)\n"
              "import importlib.util\n"
              "real = importlib.util.find_spec('pkg_resources') is not None\n"
              "import llama_index_convrag\n"
              "shim = sys.modules.get('pkg_resources') is not None\n"
              "print(real, shim)")
    assert got.returncode == 0, got.stderr
    # a real pkg_resources: nothing registered (it is imported when used); none: the stand-in is
    assert got.stdout.split() in (["True", "False"], ["False", "True"])


def test_client_module_installs_the_shim_before_a_lite_connection(tmp_path):
    got = run("import llama_index_convrag.milvus.client as c\n"
              "from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus\n"
              f"client = connect_milvus(MilvusTarget({str(tmp_path / 'shim.db')!r}))\n"
              "print(type(sys.modules['pkg_resources']).__name__, client.list_collections())")
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.split() == ["module", "[]"]


def test_importing_the_package_lets_a_users_own_milvus_client_open_a_lite_file(tmp_path):
    """The stand-in is in place from ``import llama_index_convrag`` (no package object used), and that import loads
    no pymilvus; a ``MilvusClient`` the user builds then opens Milvus Lite 2.5.1 without ``pkg_resources``."""
    import importlib.metadata

    pytest.importorskip("milvus_lite")
    if importlib.metadata.version("milvus-lite").split(".")[0] != "2":
        pytest.skip("milvus-lite 3.x does not import pkg_resources")
    got = run("import llama_index_convrag\n"
              "print('pymilvus' in sys.modules, type(sys.modules['pkg_resources']).__name__)\n"
              "from pymilvus import MilvusClient\n"
              f"print(MilvusClient({str(tmp_path / 'own.db')!r}).list_collections())")
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.split() == ["False", "module", "[]"]
