"""``convrag --version``: the installed version, exit 0, nothing else run."""

from importlib.metadata import version

from llama_index_convrag import __version__
from llama_index_convrag.cli import main


def test_version_prints_the_installed_version(capsys):
    assert main(["--version"]) == 0
    out, err = capsys.readouterr()
    assert out == f"convrag {version('llama-index-convrag')}\n" and err == ""
    assert version("llama-index-convrag") == __version__
