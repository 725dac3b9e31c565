"""tests/schedule.py: the long files it names exist and their items come first, in its order."""

from pathlib import Path
from types import SimpleNamespace

from tests.schedule import LONG_FILES, pytest_collection_modifyitems, pytest_configure

ROOT = Path(__file__).resolve().parents[1]


def test_every_long_file_exists_once():
    assert [p for p in LONG_FILES if not (ROOT / p).is_file()] == []
    assert len(set(LONG_FILES)) == len(LONG_FILES)


def test_long_files_move_to_the_front_in_their_order_and_the_rest_keep_theirs():
    ids = ["tests/a.py::x", f"{LONG_FILES[1]}::y", "tests/b.py::z", f"{LONG_FILES[0]}::u", f"{LONG_FILES[1]}::v"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == [ids[3], ids[1], ids[4], ids[0], ids[2]]


def test_xdist_keeps_the_collection_order():
    """pytest-xdist's default (``--loadscope-reorder``) would start the files with the most tests first."""
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    pytest_configure(config)
    assert config.option.loadscopereorder is False
    without_xdist = SimpleNamespace(option=SimpleNamespace())
    pytest_configure(without_xdist)
    assert vars(without_xdist.option) == {}
