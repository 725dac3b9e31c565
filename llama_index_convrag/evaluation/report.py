"""Machine-readable JSON reports: configuration, metrics, per-query results and latency percentiles."""

from __future__ import annotations

import json
import math
import platform
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError

REPORT_SCHEMA = "llama-index-convrag/eval-report/v1"
REPORT_KINDS = ("retrieval", "conversation", "answers")
_VERSIONED = ("llama-index-convrag", "llama-index-core", "pymilvus", "milvus-lite", "ranx")


def latency_summary(latencies_s: Sequence[float]) -> Dict[str, float]:
    """``count, mean_ms, p50_ms, p95_ms, max_ms`` (numpy linear-interpolated percentiles); zeros when empty."""
    if len(latencies_s) == 0:
        return {"count": 0, "mean_ms": 0.0, "p50_ms": 0.0, "p95_ms": 0.0, "max_ms": 0.0}
    ms = np.asarray(latencies_s, dtype=np.float64) * 1000.0
    return {
        "count": int(ms.size),
        "mean_ms": round(float(ms.mean()), 3),
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
        "max_ms": round(float(ms.max()), 3),
    }


def _versions() -> Dict[str, Optional[str]]:
    found: Dict[str, Optional[str]] = {}
    for name in _VERSIONED:
        try:
            found[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            found[name] = None
    return found


def _jsonable(value: Any) -> Any:
    """Plain JSON types; NaN/inf become null so the file stays strict JSON."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    raise ArgumentTypeError(f"report values must be JSON-serialisable, got {type(value).__name__}: {value!r:.100}")


def build_report(kind: str, *, config: Mapping[str, Any], results: Mapping[str, Any],
                 extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The report document. ``results`` maps configuration name -> that configuration's results dict
    (``RetrievalResult.to_dict()``, ``ConversationResult.to_dict()``, ...)."""
    if kind not in REPORT_KINDS:
        raise ConfigurationError(f"kind must be one of {list(REPORT_KINDS)}, got {kind!r}")
    if not results:
        raise ConfigurationError("results must name at least one configuration")
    return _jsonable({
        "schema": REPORT_SCHEMA,
        "kind": kind,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "environment": {"python": platform.python_version(), "packages": _versions()},
        "config": dict(config),
        "results": dict(results),
        **({"extra": dict(extra)} if extra is not None else {}),
    })


def write_report(path: Union[str, Path], report: Mapping[str, Any]) -> Path:
    """Write a report built by :func:`build_report` as UTF-8 JSON (parent folders created)."""
    if report.get("schema") != REPORT_SCHEMA:
        raise ConfigurationError(f"not a report built by build_report (schema {report.get('schema')!r})")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    return target


def load_report(path: Union[str, Path]) -> Dict[str, Any]:
    """Read a report back, checking its schema tag."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("schema") != REPORT_SCHEMA:
        raise ConfigurationError(f"{path}: not an evaluation report (schema {data.get('schema')!r})")
    return data


def metric_table(report: Mapping[str, Any], metrics: Optional[Sequence[str]] = None) -> str:
    """A plain-text table, one row per configuration: the metrics then latency p50/p95."""
    rows = report["results"]
    names = list(metrics) if metrics is not None else list(next(iter(rows.values()))["metrics"])
    header = ["configuration", *names, "p50 ms", "p95 ms"]
    lines = [header]
    for config_name, result in rows.items():
        latency = result.get("latency") or {}
        timed = latency.get("count", 1) > 0 and "p50_ms" in latency  # records replayed as given carry no timing
        lines.append([
            config_name,
            *(f"{result['metrics'][m]:.4f}" if result["metrics"].get(m) is not None else "-" for m in names),
            f"{latency['p50_ms']:.1f}" if timed else "-", f"{latency['p95_ms']:.1f}" if timed else "-",
        ])
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    out = [" | ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
           for row in lines]
    out.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(out)
