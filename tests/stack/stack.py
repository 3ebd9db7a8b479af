"""Drive the real local engine stack (vLLM on the CPU behind vllm-router, sglang-router or
NVIDIA Dynamo's frontend).

The work is done by the scripts in `scripts/`; this module runs them and reads their answer:

    engine-setup        install once into ~/.cache/evalgate/engine (cached: seconds afterwards)
    engine-up TOPOLOGY [FLAG...]  start `single`, `pd`, `sglang` or `dynamo` (FLAGs: a config
                        change for its engines), print KEY=VALUE lines with the URLs and what
                        they serve
    engine-down TOPOLOGY

Standard library only, so that it works in any interpreter that has pytest.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib import error, request

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SKIP_VARIABLE = "EVALGATE_SKIP_ENGINE"

SETUP_TIMEOUT = 3600.0  # a fresh install downloads and installs ~4 GB
UP_TIMEOUT = 900.0  # engine-up has its own, shorter deadlines; this one only guards against a hang
DOWN_TIMEOUT = 120.0

# In a parallel test run (pytest-xdist) the other workers keep every CPU busy, and a stack spread
# over them runs many times slower (engine-up's EVALGATE_ENGINE_CPUS says why): there each stack
# runs on one CPU, the last this process may use. A run in one process leaves it spread.
PINNED = (
    {"EVALGATE_ENGINE_CPUS": str(max(os.sched_getaffinity(0)))}
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1
    and "EVALGATE_ENGINE_CPUS" not in os.environ
    else {}
)


class EngineStackError(RuntimeError):
    """A script of the engine stack failed; the message carries the end of its output."""


class EngineStackTimeout(EngineStackError):
    """A script of the engine stack did not finish in time and was killed."""


@dataclass(frozen=True)
class EngineStack:
    """A running stack, as engine-up described it. URLs are OpenAI base URLs ending in /v1."""

    topology: str  # "single", "pd", "sglang" or "dynamo"
    run_dir: Path  # pids and logs
    model: str  # served model name
    router_url: str  # the router's, or Dynamo's frontend's
    engine_url: str | None = None  # single, sglang, dynamo
    engine_max_model_len: int | None = None
    prefill_url: str | None = None  # pd
    prefill_max_model_len: int | None = None
    decode_url: str | None = None
    decode_max_model_len: int | None = None
    dtype: str = ""  # what the (first) engine serves, read from its log
    kv_cache_dtype: str = ""
    flags: str = ""  # the config change applied: engine-up's flags, or the stand-in
    stand_in: str = ""  # empty, or the stand-in served for a change this CPU refuses

    @property
    def router_max_model_len(self) -> int:
        """What the router's /v1/models reports: its only engine's, or the (first) prefill's."""
        single = self.topology == "single"
        value = self.engine_max_model_len if single else self.prefill_max_model_len
        assert value is not None
        return value


def skip_reason() -> str | None:
    """Why the engine tests should be skipped, or None to run them."""
    if os.environ.get(SKIP_VARIABLE) == "1":
        return f"{SKIP_VARIABLE}=1: the real engine stack is not set up"
    return None


def _run(script: str, *args: str, timeout: float, env: Mapping[str, str] | None = None) -> str:
    """Run scripts/SCRIPT (with `env` added to the environment) and return its stdout; raise
    EngineStackError on any failure."""
    command = [str(SCRIPTS / script), *args]
    shown = shlex.join(command)
    full_env = {**os.environ, **PINNED, **(env or {})}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False, env=full_env
        )
    except subprocess.TimeoutExpired as exc:
        raise EngineStackTimeout(f"{shown} did not finish within {timeout:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-60:])
        raise EngineStackError(f"{shown} failed with exit code {done.returncode}:\n{tail}")
    return done.stdout


def parse_env(text: str) -> dict[str, str]:
    """Read engine-up's KEY=VALUE lines (values shell-quoted with printf %q)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = "".join(shlex.split(value))
    return values


def setup() -> None:
    """Install the stack, or find it installed (engine-setup is idempotent)."""
    _run("engine-setup", timeout=SETUP_TIMEOUT)


def up(
    topology: str, env: Mapping[str, str] | None = None, flags: Sequence[str] = ()
) -> EngineStack:
    """Start TOPOLOGY and wait until its router serves; engine-up stops it again on failure.
    `env`: engine-up's own settings (ports, run directory) for a stack of a test's own;
    `flags`: further vLLM flags for its engines (a config change, e.g. --kv-cache-dtype fp8)."""
    try:
        answer = parse_env(_run("engine-up", topology, *flags, timeout=UP_TIMEOUT, env=env))
    except EngineStackTimeout:
        # engine-up stops what it started when it fails, but it gets no chance when killed.
        down(topology, env)
        raise
    return _stack(answer)


def _stack(env: Mapping[str, str]) -> EngineStack:
    """The stack engine-up's KEY=VALUE lines describe."""

    def length(key: str) -> int | None:
        return int(env[key]) if key in env else None

    return EngineStack(
        topology=env["TOPOLOGY"],
        run_dir=Path(env["RUN_DIR"]),
        model=env["SERVED_MODEL_NAME"],
        router_url=env["ROUTER_URL"],
        engine_url=env.get("ENGINE_URL"),
        engine_max_model_len=length("ENGINE_MAX_MODEL_LEN"),
        prefill_url=env.get("PREFILL_URL"),
        prefill_max_model_len=length("PREFILL_MAX_MODEL_LEN"),
        decode_url=env.get("DECODE_URL"),
        decode_max_model_len=length("DECODE_MAX_MODEL_LEN"),
        dtype=env.get("ENGINE_DTYPE", env.get("PREFILL_DTYPE", "")),
        kv_cache_dtype=env.get("ENGINE_KV_CACHE_DTYPE", env.get("PREFILL_KV_CACHE_DTYPE", "")),
        flags=env.get("ENGINE_FLAGS", ""),
        stand_in=env.get("ENGINE_STAND_IN", ""),
    )


def down(topology: str, env: Mapping[str, str] | None = None) -> None:
    """Stop TOPOLOGY: SIGTERM, then SIGKILL after a deadline, to every process group it started."""
    _run("engine-down", topology, timeout=DOWN_TIMEOUT, env=env)


# --- HTTP, for the tests ---------------------------------------------------------------------


def server_root(base_url: str) -> str:
    """`http://host:port` from a base URL `http://host:port/v1` (/tokenize is not under /v1)."""
    return base_url.removesuffix("/").removesuffix("/v1")


def chat(url: str, model: str, content: str, max_tokens: int, **more: Any) -> tuple[int, Any]:
    """POST one user message to `url`/chat/completions (an OpenAI base URL): status and answer."""
    message = {"role": "user", "content": content}
    body = {"model": model, "messages": [message], "max_tokens": max_tokens, **more}
    return http_json(f"{url}/chat/completions", body)


def worker_limit(running: EngineStack) -> list[dict[str, object]]:
    """The served limit evalgate reads from the worker behind `running`'s router: 2048."""
    return [{"value": 2048, "source": f"/v1/models of worker {running.engine_url}"}]


def refusal(url: str, model: str, max_tokens: int) -> str:
    """The engine's own words refusing a one-word chat request for `max_tokens` (HTTP 400)."""
    status, body = chat(url, model, "Hi", max_tokens)
    assert status == 400, body
    return str(body["error"]["message"])


def http_json(url: str, body: Any = None, timeout: float = 120.0) -> tuple[int, Any]:
    """GET (or POST `body` as JSON) and return the status and the decoded JSON answer.

    An HTTP error status is returned, not raised: a 4xx with a JSON body is an answer to check.
    """
    data = None if body is None else json.dumps(body).encode()
    req = request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with request.urlopen(req, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode(errors="replace")
