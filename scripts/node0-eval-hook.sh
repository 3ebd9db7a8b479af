#!/usr/bin/env bash
# Post-benchmark accuracy gate for node 0 of a (multi-node, disaggregated) benchmark job.
#
# A thin wrapper over `evalgate hook`: it reads the benchmark's own environment, waits for the
# router, probes the real output budget once, runs GSM8K at each concurrency and stages every
# artifact, on success, on failure and on SIGTERM from the scheduler. Its exit code is the job's:
# 0 pass, 1 below threshold, 2 bad input, 3 endpoint not ready / probe rejected, 4 eval failed,
# 6 aborted. An eval that could not run fails the job.
#
# Environment read (the benchmark's names; docs/settings.md lists every variable):
#   MODEL                              required
#   ISL, OSL                           the context (0 or unset: the native maximum, else served)
#   ROUTER_URL                         the router's OpenAI base URL (…/v1), or EVALGATE_BASE_URL
#   DECODE_SERVER_CONFIG, PREFILL_SERVER_CONFIG   server arguments holding --max-model-len N
#   EVALGATE_WORKER_URLS               prefill/decode worker URLs, comma-separated (optional)
#   MODEL_PATH                         model directory (config.json gives the native maximum)
#   EVAL_CONC, EVAL_CONCURRENT_REQUESTS or CONC   concurrencies, e.g. "16 64 256"
#   FRAMEWORK, PRECISION, RUNNER_TYPE, MODEL_PREFIX, KV_CACHE_DTYPE   labels for the results
#   PREFILL_*/DECODE_* topology (PREFILL_TP, DECODE_NUM_WORKERS, ...)  recorded as labels
#   SGLANG_SIMULATE_ACC_LEN            simulated MTP acceptance: refused (exit 2) unless
#                                      --allow-simulated-acceptance is passed
#   EVALGATE_STAGE_DIR                 staging folder for the artifacts [./evalgate-stage]
#   EVALGATE_LAYOUT                    "harness": the benchmark harness's own files (docs/harness.md)
#   EVALGATE_PYTHON_ENV                a virtualenv holding evalgate, activated if given
# Extra arguments are passed to `evalgate hook` (e.g. --limit 200, --resume).
set -euo pipefail

if [[ -n "${EVALGATE_PYTHON_ENV:-}" ]]; then
  # shellcheck source=/dev/null
  . "$EVALGATE_PYTHON_ENV/bin/activate"
fi
if ! command -v evalgate >/dev/null 2>&1; then
  echo "node0-eval-hook: evalgate is not on PATH; install it or set EVALGATE_PYTHON_ENV." >&2
  exit 2
fi
exec evalgate hook --output-dir "${EVALGATE_STAGE_DIR:-evalgate-stage}" "$@"
