import pytest
from matplotlib.figure import Figure
from PIL import Image

from llama_index_convrag.evaluation.plots import plot_latency_distribution, plot_metric_bars, plot_turn_curves


def _check_png(path, width, height):
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == (width, height)
        assert len(set(image.convert("L").getdata())) > 10  # something was drawn


def test_metric_bars(tmp_path):
    figure = plot_metric_bars({"dense": {"ndcg@10": 0.66, "recall@100": 0.93},
                               "sparse": {"ndcg@10": 0.67, "recall@100": 0.91}},
                              path=tmp_path / "plots" / "bars.png")
    assert isinstance(figure, Figure)
    _check_png(tmp_path / "plots" / "bars.png", 600, 400)
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["ndcg@10", "recall@100"]
    assert [t.get_text() for t in figure.axes[0].get_legend().get_texts()] == ["dense", "sparse"]


def test_latency_and_turn_curves(tmp_path):
    plot_latency_distribution({"dense": [3.0, 3.5, 9.0, 4.0], "hybrid": [6.0, 7.0, 6.5], "empty": []},
                              path=tmp_path / "latency.png")
    _check_png(tmp_path / "latency.png", 600, 400)
    figure = plot_turn_curves({"raw": {1: 0.9, 2: 0.3, 3: 0.2}, "manual": {1: 0.9, 2: 0.8, 3: 0.7}},
                              metric="ndcg@3", path=tmp_path / "turns.png")
    _check_png(tmp_path / "turns.png", 700, 400)
    assert figure.axes[0].get_ylabel() == "ndcg@3"
    assert [list(line.get_ydata()) for line in figure.axes[0].get_lines()] == [[0.9, 0.3, 0.2], [0.9, 0.8, 0.7]]


def test_plot_errors(tmp_path):
    with pytest.raises(ValueError, match="path must end in .png"):
        plot_turn_curves({"raw": {1: 0.5}}, path=tmp_path / "x.svg")
    with pytest.raises(ValueError, match=r"metrics missing per configuration: \{'b': \['mrr@10'\]\}"):
        plot_metric_bars({"a": {"mrr@10": 1.0}, "b": {"ndcg@10": 1.0}})
    with pytest.raises(ValueError, match="holds no latency"):
        plot_latency_distribution({"a": []})
    assert not list(tmp_path.iterdir())
