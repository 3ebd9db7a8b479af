"""The Settings model: every value read from flags, then the environment, then defaults.

Every field is a command-line flag (``--isl``) and an environment variable (``EVALGATE_ISL``);
the benchmark harness's own names (``ISL``, ``OSL``, ``MODEL``, ``MODEL_PATH``,
``EVAL_MAX_MODEL_LEN``, ``OPENAI_API_KEY``, ...) are accepted too. The field docstrings are the
documentation: the README's settings table is generated from them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    AliasGenerator,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from evalgate.engine.urls import redact_url
from evalgate.lengths import SUFFIXES
from evalgate.settings.defaults import DEFAULT_MAX_DROP

TOKEN_LENGTHS = (
    "isl",
    "osl",
    "context_margin",
    "served_max_model_len",
    "eval_max_model_len",
    "max_tokens",
    "max_tokens_cap",
)
"""Settings in tokens: written as server arguments write them (8192, 8k = 8000, 8K = 8192)."""
_TOKEN_COUNT = re.compile(r"(\d+)([kKmM])")


def token_count(value: Any) -> Any:
    """A length in tokens with vLLM's suffixes (human_readable_int: 8k = 8000, 8K = 8192) as
    an int; anything else unchanged, for the field's own validation."""
    if not isinstance(value, str):
        return value
    match = _TOKEN_COUNT.fullmatch(value.strip())
    return int(match.group(1)) * SUFFIXES[match.group(2)] if match else value


def check_url(url: str) -> str:
    """An http(s) URL with a host and a valid port; the message never repeats a password."""
    parts = urlsplit(url.strip())
    shown = redact_url(url)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{shown!r} has an invalid port; write http://HOST:PORT/v1") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{shown!r} is not an http(s) URL with a host; write http://HOST:PORT/v1")
    if parts.query or parts.fragment:  # /models and /chat/completions go after the path
        extra = ("?" + parts.query if parts.query else "") + (
            "#" + parts.fragment if parts.fragment else ""
        )
        raise ValueError(
            f"{shown!r} has a query or fragment ({extra}); evalgate appends /models and "
            "/chat/completions to the path, so drop it: write http://HOST:PORT/v1"
        )
    del port
    return url.strip()


def _env(name: str, *extra: str) -> AliasChoices:
    """A field's own EVALGATE_ variable first, then the benchmark harness's names. (Keyword
    arguments use the field name: populate_by_name.)"""
    return AliasChoices(f"EVALGATE_{name.upper()}", *extra)


def _url_from_port(data: dict[str, Any]) -> str | None:
    port = data.get("port")
    return f"http://127.0.0.1:{port}/v1" if port else None


class Settings(BaseSettings):
    """Everything an evalgate command can be told."""

    model_config = SettingsConfigDict(
        env_prefix="EVALGATE_",
        case_sensitive=True,  # API_KEY or isl in the environment are not evalgate's
        # Fields without benchmark names are read from EVALGATE_<FIELD> (upper case).
        alias_generator=AliasGenerator(validation_alias=_env),
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="ignore",
        frozen=True,
    )

    # -- the endpoint ------------------------------------------------------------------------
    port: int | None = Field(None, ge=1, le=65535, validation_alias=_env("port", "PORT"))
    """The engine's port on this host, as the benchmark harness gives it: without a base URL,
    the endpoint is http://127.0.0.1:PORT/v1."""

    base_url: str | None = Field(
        default_factory=_url_from_port,
        validation_alias=_env("base_url", "ROUTER_URL", "OPENAI_BASE_URL"),
        repr=False,
    )
    """OpenAI-compatible endpoint the eval talks to, ending in /v1 (the router's, in a
    disaggregated job)."""

    model: str | None = Field(None, validation_alias=_env("model", "MODEL"))
    """The model: the key for thresholds and the config, and the name sent in every request
    unless --served-model-name gives another."""

    served_model_name: str | None = Field(
        None, validation_alias=_env("served_model_name", "MODEL_NAME")
    )
    """The name the engine serves the model under, sent in every request and looked for in
    /v1/models (the benchmark harness's MODEL_NAME, preferred over MODEL there; default:
    --model)."""

    api_key: SecretStr | None = Field(
        None, validation_alias=_env("api_key", "OPENAI_API_KEY"), repr=False
    )
    """Bearer token for the endpoint. Never printed or stored, nor anything the engine says
    back holding it (a placeholder under 8 characters, such as EMPTY, is no secret)."""

    api: Literal["chat", "completions"] = "chat"
    """Which API the eval uses: chat (the benchmark harness's protocol: chat template, 5-shot
    as turns) or completions (lm-eval's standard 5-shot gsm8k prompt)."""

    worker_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=_env("worker_urls", "WORKER_URLS"), repr=False
    )
    """Prefill/decode worker URLs (…/v1) whose /v1/models limits also clamp the context.
    Repeatable flag; comma-separated in the environment."""

    # -- the eval context --------------------------------------------------------------------
    isl: int | None = Field(None, ge=1, validation_alias=_env("isl", "ISL"))
    """Benchmark input sequence length in tokens (8192; 8k = 8000 and 8K = 8192, as vLLM reads
    server arguments; so for every length in tokens). 0 or empty: not given, as the benchmark
    harness's agentic rows say it; the context then starts from the native maximum."""

    osl: int | None = Field(None, ge=1, validation_alias=_env("osl", "OSL"))
    """Benchmark output sequence length in tokens (0 or empty: not given)."""

    context_margin: int = Field(256, ge=0)
    """Tokens added to ISL + OSL for the eval context."""

    model_config_path: Path | None = Field(
        None, validation_alias=_env("model_config_path", "EVALGATE_MODEL_CONFIG", "MODEL_PATH")
    )
    """The model's config.json, or its directory; gives the native maximum length.
   """

    served_max_model_len: int | None = Field(None, ge=1)
    """The --max-model-len the engines serve, when /v1/models cannot tell (TensorRT-LLM)."""

    server_config: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Engine server-argument strings holding --max-model-len N (as benchmark scripts keep
    them). Repeatable flag; one string in EVALGATE_SERVER_CONFIG."""

    prefill_server_config: str | None = Field(
        None, validation_alias=_env("prefill_server_config", "PREFILL_SERVER_CONFIG")
    )
    """The prefill workers' server arguments."""

    decode_server_config: str | None = Field(
        None, validation_alias=_env("decode_server_config", "DECODE_SERVER_CONFIG")
    )
    """The decode workers' server arguments."""

    eval_max_model_len: int | None = Field(
        None, ge=1, validation_alias=_env("eval_max_model_len", "EVAL_MAX_MODEL_LEN")
    )
    """Explicit eval context, overriding the derivation (still clamped to what is served; 0 or
    empty: not given)."""

    max_tokens: int | None = Field(None, ge=1)
    """Force the output budget instead of deriving it (the probe still checks it)."""

    max_tokens_cap: int = Field(16384, ge=1)
    """Upper bound on the derived output budget."""

    budget_policy: Literal["fit", "harness"] = "fit"
    """fit: served context minus the longest eval prompt. harness: the benchmark harness's rule
    (ctx - 4096 when ctx > 4096, else ctx / 2), both capped at max_tokens_cap."""

    # -- readiness and the probe -------------------------------------------------------------
    ready_timeout: float = Field(600.0, ge=0)
    """Seconds to wait for the endpoint to answer /v1/models before giving up."""

    discovery_timeout: float = Field(30.0, gt=0)
    """Seconds one side-door request may take, first byte to last: /readiness, /v1/models,
    /tokenize, /version (never past --ready-timeout), a worker's /v1/models, and each poll of the
    workers during the eval."""

    connect_timeout: float = Field(30.0, gt=0)
    """Seconds to wait for a TCP connection to the engine, the router or a worker: a host that
    does not answer within it has stopped answering."""

    keepalive_idle: float = Field(30.0, ge=1)
    """Seconds a connection may be silent before TCP keepalive probes start (every connection:
    a host that vanished without closing it is found without waiting for --timeout)."""

    keepalive_interval: float = Field(10.0, ge=1)
    """Seconds between TCP keepalive probes; also how often the workers are polled during the
    eval (--worker-url)."""

    keepalive_probes: int = Field(3, ge=1)
    """Keepalive probes unanswered before a connection is dropped: a host that answers nothing
    for --keepalive-idle + --keepalive-interval x this (60 s by default; TCP_USER_TIMEOUT) has
    stopped answering, and so has a worker no poll reached for as long."""

    max_response_bytes: int = Field(16 << 20, ge=1024)
    """Largest answer read from an engine, decoded (after gzip): a longer one is cut there and
    counts as a failed request, said so."""

    retry_wait_min: float = Field(1.0, ge=0)
    """First backoff wait in seconds between retries of a retryable failure."""

    retry_wait_max: float = Field(10.0, ge=0)
    """Longest backoff wait in seconds."""

    strict: bool = False
    """Treat a budget that would truncate answers (prompt + budget > served) as an error."""

    # -- the eval ----------------------------------------------------------------------------
    num_concurrent: int = Field(64, ge=1)
    """Requests in flight during the eval."""

    limit: int | None = Field(None, ge=1, validation_alias=_env("limit", "EVAL_LIMIT"))
    """Evaluate only the first N questions (for smoke tests; too small to gate on)."""

    concurrency: str | None = Field(
        None,
        validation_alias=_env("concurrency", "EVAL_CONC", "EVAL_CONCURRENT_REQUESTS", "CONC"),
    )
    """`evalgate hook`: the concurrencies to evaluate one after another on the same live engine
    (one probe), e.g. "4 8" or 16,64,256; each gets its own result. Default: --num-concurrent."""

    timeout: float = Field(1800.0, gt=0)
    """Seconds one generation request may take, first byte to last (the probe: at most 60 s to
    its first token)."""

    max_attempts: int = Field(5, ge=1)
    """Attempts per request for retryable failures (connection errors, 408, 429, 5xx)."""

    chat_template_kwargs: Annotated[dict[str, Any] | None, NoDecode] = None
    """A JSON object sent as chat_template_kwargs in every request, the probe's included, and
    recorded in the result (e.g. '{"enable_thinking": false}' to turn a model's thinking off)."""

    reasoning_effort: str | None = None
    """Sent as reasoning_effort in every request, the probe's included, and recorded (low,
    medium or high for models that take it, e.g. gpt-oss)."""

    max_failed_requests: int = Field(0, ge=0)
    """Requests allowed to fail for good before the run is an error (0: any failure is)."""

    max_truncated_rate: float = Field(1.0, ge=0, le=1)
    """Share of answers that may end by length or come back empty before the run fails
    (1.0: report only)."""

    task: str = "gsm8k"
    """The task to gate: gsm8k (the harness's GSM8K), gpqa_diamond_cot_n_shot (the harness's
    GPQA-diamond, its data in --dataset-dir), or the path of an lm-eval task YAML of
    generate_until type with {{field}} templates and local JSONL data files; the threshold is
    the one for this task (a file's: its task name). Loglikelihood tasks are refused."""

    dataset_dir: Path | None = None
    """Folder with the task's data: GSM8K's test.jsonl and train.jsonl (instead of the copy
    evalgate ships), or GPQA-diamond's gpqa_diamond.csv (or .jsonl), which cannot ship."""

    dataset_hub: bool = False
    """Load openai/gsm8k from the Hugging Face hub instead of the shipped copy."""

    eval_tasks_dir: Path | None = Field(
        None, validation_alias=_env("eval_tasks_dir", "EVAL_TASKS_DIR")
    )
    """The benchmark harness's eval task file. evalgate runs its own copy of the harness's
    gsm8k task: `evalgate hook` warns when this names another file (other tasks are not run)."""

    sglang_simulate_acc_len: str | None = Field(
        None,
        validation_alias=_env("sglang_simulate_acc_len", "SGLANG_SIMULATE_ACC_LEN"),
    )
    """SGLang's simulated speculative acceptance length, as the job sets it: anything but empty
    or 0 means the engine fakes which draft tokens it accepts, and the gate refuses (exit 2).
    Give it when the engine's environment holds it but the gate's does not."""

    allow_simulated_acceptance: bool = False
    """Gate even when acceptance is simulated (SGLANG_SIMULATE_ACC_LEN, or
    --spec-decode-acceptance-length in the server arguments): the scores then say nothing about
    the model; the result's warnings record it."""

    think_end_marker: str = "</think>"
    """The end of a reasoning model's thinking written into its answer (no reasoning parser):
    only the text after its last occurrence is scored. Empty: score the whole answer, as the
    benchmark harness does."""

    think_start_marker: str = "<think>"
    """The start of thinking written into the answer: an answer holding it but never reaching
    --think-end-marker was cut while thinking, and scores nothing. Empty: no such check."""

    # -- the gate and its evidence -----------------------------------------------------------
    thresholds: Path | None = None
    """Thresholds file to gate on, YAML or JSON (the benchmark harness's thresholds.yaml as it
    is; default: the one evalgate ships)."""

    early_stop: Literal["off", "fail", "pass", "both"] = "off"
    """Stop asking questions as soon as an anytime-valid test is certain of the verdict: fail
    (once any filter is certainly below the threshold), pass (once every filter is certainly
    above), both, or off (every question, the benchmark harness's protocol). The questions are
    then sent in a seeded random order and read in that order."""

    alpha: float = Field(0.05, gt=0, lt=1)
    """With --early-stop: the most often a run at or below the threshold passes early (and one at
    or above it fails early)."""

    output_dir: Path = Path("evalgate-results")
    """Where result.json, samples.jsonl and lm-eval's raw results are written."""

    layout: Literal["evalgate", "harness"] = "evalgate"
    """`evalgate hook`: evalgate's own folders (conc-<N>/), or the benchmark harness's files in
    output_dir (meta_env.json, results_<ts>_conc<N>.json, samples_gsm8k_<ts>_conc<N>.jsonl)
    with evalgate's own results under evalgate/; harness also decides as the harness's
    validator does, on the point estimate (--min-samples 0), unless --min-samples is given."""

    overwrite: bool = False
    """Replace a result already in output_dir (otherwise that is an error)."""

    baseline: Path | None = None
    """An earlier run's folder: after the gate, compare this run with it question by question
    (the `evalgate compare` report is printed and saved as comparison.json)."""

    max_drop: float = Field(DEFAULT_MAX_DROP, ge=0, lt=1)
    """With --baseline: the accuracy drop (as a fraction) still called equivalent."""

    min_samples: int | None = Field(None, ge=0)
    """Questions below which a score whose 95% interval straddles the threshold is
    inconclusive (exit 5) rather than decided on its point estimate (default: the full test
    set, 1319; 0 decides every score on its point estimate, as the benchmark harness does)."""

    # -- labels recorded in the result -------------------------------------------------------
    model_prefix: str | None = Field(None, validation_alias=_env("model_prefix", "MODEL_PREFIX"))
    """Model family key for thresholds (dsr1, gptoss, ...)."""

    hardware: str | None = Field(None, validation_alias=_env("hardware", "RUNNER_TYPE"))
    """Hardware label (b200, mi355x, ...)."""

    framework: str | None = Field(None, validation_alias=_env("framework", "FRAMEWORK"))
    """Engine label (vllm, sglang, trt, ...)."""

    precision: str | None = Field(None, validation_alias=_env("precision", "PRECISION"))
    """Weight precision label (fp8, fp4, ...)."""

    kv_cache_dtype: str | None = Field(
        None, validation_alias=_env("kv_cache_dtype", "KV_CACHE_DTYPE")
    )
    """KV-cache dtype label (auto, fp8, ...)."""

    spec_decoding: str | None = Field(None, validation_alias=_env("spec_decoding", "SPEC_DECODING"))
    """Speculative decoding label (mtp, eagle, ...): written to meta_env.json and part of the
    config's topology."""

    is_multinode: bool = Field(False, validation_alias=_env("is_multinode", "IS_MULTINODE"))
    """A multi-node (disaggregated) job: its files then label it by its prefill and decode
    topology (PREFILL_*, DECODE_*), as the benchmark harness's do; a single-node job by TP,
    EP_SIZE and DP_ATTENTION."""

    result_filename: str | None = Field(
        None, validation_alias=_env("result_filename", "RESULT_FILENAME")
    )
    """The benchmark job's result name; gives the precision and framework labels when they are
    not set (…_<precision>_<framework>_tp…, as the harness reads it)."""

    @field_validator(*TOKEN_LENGTHS, mode="before")
    @classmethod
    def _token_count(cls, value: Any) -> Any:
        return token_count(value)

    @field_validator("isl", "osl", "eval_max_model_len", mode="before")
    @classmethod
    def _zero_is_unset(cls, value: Any) -> Any:
        """0 (or an empty variable) means "not given", as the benchmark harness reads ISL, OSL
        and the eval context: its agentic rows pass '0' for all three."""
        value = token_count(value)
        text = value.strip() if isinstance(value, str) else None
        if text == "" or (text is not None and text.isdigit() and int(text) == 0):
            return None
        return None if type(value) is int and value == 0 else value

    @field_validator("retry_wait_max")
    @classmethod
    def _waits_in_order(cls, value: float, info: ValidationInfo) -> float:
        low = info.data.get("retry_wait_min")
        if isinstance(low, float | int) and value < low:
            raise ValueError(
                f"the longest backoff wait is below --retry-wait-min {low:g}: give "
                "--retry-wait-max at least --retry-wait-min"
            )
        return value

    @field_validator("worker_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        """In the environment, several URLs are separated by commas."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("baseline")
    @classmethod
    def _not_with_early_stop(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and info.data.get("early_stop", "off") != "off":
            raise ValueError(
                f"a run stopped early cannot be compared with --baseline {value} (its questions "
                "were chosen by its own answers); use --early-stop off to compare, or drop "
                "--baseline"
            )
        return value

    @field_validator("chat_template_kwargs", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """Given as text (a flag, a variable), the value is a JSON object."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"not JSON ({exc.msg}); give a JSON object such as '{{\"enable_thinking\": false}}'"
            ) from exc
        if not isinstance(parsed, dict):  # a ValueError: pydantic reports it as invalid input
            example = '{"enable_thinking": false}'
            raise ValueError(f"not a JSON object; give one such as '{example}'")  # noqa: TRY004
        return parsed

    def request_fields(self) -> dict[str, Any]:
        """What every generation request carries besides the task's settings."""
        fields: dict[str, Any] = {}
        if self.chat_template_kwargs is not None:
            fields["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        if self.reasoning_effort is not None:
            fields["reasoning_effort"] = self.reasoning_effort
        return fields

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return check_url(value) if value is not None else None

    @field_validator("worker_urls")
    @classmethod
    def _http_urls(cls, value: list[str]) -> list[str]:
        return [check_url(url) for url in value]

    @field_validator("server_config", mode="before")
    @classmethod
    def _one_config(cls, value: Any) -> Any:
        """In the environment, the variable holds one server-argument string."""
        if isinstance(value, str):
            return [value] if value.strip() else []
        return value

    @field_validator(
        "base_url",
        "model",
        "port",
        "served_model_name",
        "limit",
        "concurrency",
        "eval_tasks_dir",
        "spec_decoding",
        "result_filename",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        """A job script's empty variable (EVAL_LIMIT="") means unset, as in the harness."""
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("output_dir", mode="before")
    @classmethod
    def _a_folder_named(cls, value: Any) -> Any:
        """'' would be read as the working directory itself: an unset variable, not a choice."""
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                "an empty folder name would write the evidence into the working directory "
                "itself: pass a folder (the default is evalgate-results), or . for the working "
                "directory"
            )
        return value

    @field_validator("is_multinode", mode="before")
    @classmethod
    def _blank_is_false(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return False
        return value

    def server_args(self) -> list[tuple[str, str]]:
        """The engines' server-argument strings given, each with where it came from."""
        given = [(args, f"--server-config #{i + 1}") for i, args in enumerate(self.server_config)]
        if self.prefill_server_config:
            given.append((self.prefill_server_config, "PREFILL_SERVER_CONFIG"))
        if self.decode_server_config:
            given.append((self.decode_server_config, "DECODE_SERVER_CONFIG"))
        return given

    @property
    def served_model(self) -> str | None:
        """The name requests carry: --served-model-name, else --model."""
        return self.served_model_name or self.model
