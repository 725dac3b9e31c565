"""PNG plots with matplotlib's Agg canvas (no pyplot, no global backend switch, works headless).

Each function returns the ``Figure`` (notebooks can display it) and writes ``path`` when given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union
from llama_index_convrag.errors import ConfigurationError

PathLike = Union[str, Path]


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("plots need matplotlib: pip install 'llama-index-convrag[eval]'") from exc
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Any, path: Optional[PathLike]) -> Any:
    if path is not None:
        target = Path(path)
        if target.suffix.lower() != ".png":
            raise ConfigurationError(f"plots are written as PNG; path must end in .png, got {str(target)!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(target, format="png")
    return figure


def plot_metric_bars(metrics_by_config: Mapping[str, Mapping[str, float]], metrics: Optional[Sequence[str]] = None,
                     *, path: Optional[PathLike] = None, title: str = "Retrieval quality") -> Any:
    """Grouped bars: one group per metric, one bar per configuration, value printed on each bar."""
    if not metrics_by_config:
        raise ConfigurationError("metrics_by_config must name at least one configuration")
    names = list(metrics) if metrics is not None else list(next(iter(metrics_by_config.values())))
    missing = {cfg: [m for m in names if m not in vals] for cfg, vals in metrics_by_config.items()}
    missing = {cfg: ms for cfg, ms in missing.items() if ms}
    if missing:
        raise ConfigurationError(f"metrics missing per configuration: {missing}")
    configs = list(metrics_by_config)
    figure = _figure(max(6.0, 1.2 * len(names) * max(1, len(configs)) / 2 + 2), 4.0)
    axes = figure.add_subplot()
    width = 0.8 / len(configs)
    for i, config in enumerate(configs):
        xs = [j + (i - (len(configs) - 1) / 2) * width for j in range(len(names))]
        values = [float(metrics_by_config[config][m]) for m in names]
        bars = axes.bar(xs, values, width=width, label=config)
        axes.bar_label(bars, fmt="%.3f", fontsize=7, padding=1)
    axes.set_xticks(range(len(names)), names)
    axes.set_ylim(0, 1.08)
    axes.set_ylabel("score")
    axes.set_title(title)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def plot_latency_distribution(latencies_ms_by_config: Mapping[str, Sequence[float]], *,
                              path: Optional[PathLike] = None, title: str = "Latency per query") -> Any:
    """Box plot per configuration (whiskers 5th-95th percentile) with the median annotated."""
    configs = [c for c, v in latencies_ms_by_config.items() if len(v)]
    if not configs:
        raise ConfigurationError("latencies_ms_by_config holds no latency")
    import numpy as np

    figure = _figure(max(6.0, 1.3 * len(configs) + 2), 4.0)
    axes = figure.add_subplot()
    data = [list(map(float, latencies_ms_by_config[c])) for c in configs]
    axes.boxplot(data, whis=(5, 95), showfliers=True)
    axes.set_xticks(range(1, len(configs) + 1), configs, rotation=15)
    for i, values in enumerate(data, start=1):
        median = float(np.median(values))
        axes.annotate(f"p50 {median:.1f}", (i, median), textcoords="offset points", xytext=(14, -3), fontsize=7)
    axes.set_ylabel("milliseconds")
    axes.set_title(title)
    axes.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def plot_turn_curves(curves: Mapping[str, Mapping[int, float]], *, metric: str = "ndcg@10",
                     path: Optional[PathLike] = None, title: Optional[str] = None) -> Any:
    """One line per strategy: mean ``metric`` by turn position in the dialogue."""
    if not curves or not any(curves.values()):
        raise ConfigurationError("curves must hold at least one point")
    from matplotlib.ticker import MaxNLocator

    figure = _figure(7.0, 4.0)
    axes = figure.add_subplot()
    for name, points in curves.items():
        xs = sorted(points)
        axes.plot(xs, [points[x] for x in xs], marker="o", markersize=3, label=name)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("turn position")
    axes.set_ylabel(metric)
    axes.set_ylim(0, 1.05)
    axes.set_title(title if title is not None else f"{metric} by turn")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return _save(figure, path)
