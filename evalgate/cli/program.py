"""The `evalgate` command's arguments in, its exit code out, no decisions. A subcommand's module
keeps its heavy imports inside `command`, so `--help` and `verify` start fast
(docs/architecture.md). Loaded by evalgate.cli.console once a stop signal ends it cleanly.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import importlib
import logging
import os
import sys
import textwrap
import threading
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, TextIO

from evalgate import scrub
from evalgate._version import __version__
from evalgate.cli import habits, stop
from evalgate.cli.habits import SUBCOMMANDS
from evalgate.environment import credentials_environment
from evalgate.errors import EvalgateError, ExitCode, UsageError, interrupt_within
from evalgate.templates import line

RECORDING = ("run", "hook")
"""Commands whose verdict is recorded on disk: output that cannot be printed leaves their exit
code as recorded. For the others, and for any command's --help, --version or --print-config,
the printed output is the product, and losing it is exit 2."""


def epilog(examples: str = "") -> str:
    """The end of a help: the command's examples (its EXAMPLES, `# what` over each command; a
    `\\` at a line's end joins the next, in Python as in a shell), then every exit code as
    ExitCode says it."""
    lines = ["examples:", textwrap.indent(examples, "  ")] if examples else []
    lines.append("exit codes:")
    for code in ExitCode:
        lines += textwrap.wrap(
            code.meaning.replace("`", ""),
            width=92,
            initial_indent=f"  {code.value}  ",
            subsequent_indent="     ",
        )
    return "\n".join(lines) + "\n"


EPILOG = epilog()
"""`evalgate --help`'s end: the exit codes."""


def _add_verbose(parser: argparse.ArgumentParser, *, default: object) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default,
        help="more log output; -v shows tracebacks",
    )


class _Parser(argparse.ArgumentParser):
    """argparse quotes in its error what it could not parse (a folder name among it): that
    part is made one safe line (evalgate.scrub), with the advice that fits the mistake
    (evalgate.cli.arguments); the usage above it is evalgate's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.words: Sequence[str] = ()
        """What followed the command's name, as typed (for the advice)."""
        self.commands: dict[str, _Parser] = {}
        """The subcommands' parsers, by name."""

    def error(self, message: str) -> NoReturn:
        super().error(scrub.terminal(habits.explained(message, self.words)))

    def check(self, command: str, words: Sequence[str]) -> None:
        """Refuse (exit 2) the first flag in `words` this command does not take, with the
        advice for it, before argparse reads the line."""
        self.words = words
        options = {name: action.nargs != 0 for name, action in self._option_string_actions.items()}
        problem = habits.unknown_flag(command, options, words)
        if problem is not None:
            self.error(problem)


def _usage(parser: argparse.ArgumentParser) -> str:
    """A command's usage line: its operands, and [options] for the dozens of flags its --help
    lists (argparse would list them all, on every error)."""
    operands = []
    for action in parser._actions:
        if not action.option_strings:
            name = str(action.metavar or action.dest.upper())
            operands.append(f"{name} [{name} ...]" if action.nargs == "+" else name)
    return " ".join(["%(prog)s [options]", *operands])


def _chosen(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if a in SUBCOMMANDS), None)


def build_parser(argv: Sequence[str] | None = None) -> _Parser:
    """The argument parser. Only the subcommand named in `argv` gets its flags (and their
    imports); with no argv, every subcommand does (for documentation and tests)."""
    chosen = _chosen(argv) if argv is not None else None
    parser = _Parser(
        prog="evalgate",
        description="Accuracy gate for LLM inference benchmarks (GSM8K through lm-eval).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    _add_verbose(parser, default=0)
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"evalgate.cli.{name}")
        child = sub.add_parser(
            name,
            help=module.HELP.replace("%", "%%"),  # argparse %-formats help, not descriptions
            description=module.HELP,
            epilog=epilog(module.EXAMPLES),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_verbose(child, default=argparse.SUPPRESS)  # `evalgate run ... -v` as users type it
        if argv is None or name == chosen:
            from evalgate.cli import (
                arguments as flags,  # pydantic loads only for the subcommand run
            )

            if hasattr(module, "add_arguments"):  # its operands, before the settings' groups
                module.add_arguments(child)
            flags.add_settings_arguments(child, name)
        child.usage = _usage(child)
        child.set_defaults(_command=module.command, _name=name, _usage=child.format_usage())
        parser.commands[name] = child
    return parser


class _OneLine(logging.Formatter):
    """Log records carry outside text (engine answers, model names, URLs): each message is one
    safe line, a traceback safe line by line (evalgate.scrub)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = scrub.terminal(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return self.formatStack(super().formatException(ei))  # as a stack: line by line

    def formatStack(self, stack_info: str) -> str:
        return scrub.terminal_block(super().formatStack(stack_info))


def _configure_logging(verbose: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    fmt = "%(message)s" if verbose == 0 else "%(asctime)s %(name)s %(levelname)s %(message)s"
    handler.setFormatter(_OneLine(fmt))
    root = logging.getLogger("evalgate")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    root.propagate = False


class _Guarded:
    """A standard stream that cannot break a run: the first write that fails (a full device, a
    closed pipe) is remembered and every later write is dropped. What is written is not
    scrubbed here (a JSON document's own words are no secret): each outside value was, as
    evalgate.scrub made it safe for the terminal."""

    def __init__(self, stream: TextIO | None) -> None:
        # A stream the shell closed (``>&-``) is None in Python: it is written to nothing, and
        # the first write fails as writing to a closed descriptor does.
        self.closed = stream is None
        self.stream: TextIO = open(os.devnull, "w", encoding="utf-8") if stream is None else stream  # noqa: SIM115
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        if self.failure is None and self.closed:
            self.failure = OSError(errno.EBADF, "the stream is closed")
        if self.failure is None:
            try:
                self.stream.write(text)
            except OSError as exc:
                self.failure = exc
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for each in lines:
            self.write(each)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self.stream.flush()
            except OSError as exc:
                self.failure = exc

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding: the stream's own
        return getattr(self.stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    out, err = _Guarded(sys.stdout), _Guarded(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        code, recorded = _main(arguments)
        out.flush()
        err.flush()
    finally:
        sys.stdout, sys.stderr = out.stream, err.stream
    if out.failure is not None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115  # no flush at exit
        reason = out.failure.strerror or type(out.failure).__name__
        with contextlib.suppress(OSError):
            print(
                f"OutputError: could not write to stdout ({reason}); "
                + (
                    "result.json holds the verdict."
                    if recorded
                    else "redirect stdout to a writable file and run again."
                ),
                file=sys.stderr,
                flush=True,
            )
        if not recorded and code == 0:
            code = int(ExitCode.USAGE)
    stop.finished(code)
    return code


def _main(arguments: list[str]) -> tuple[int, bool]:
    """The exit code, and whether the command recorded its verdict on disk (RECORDING)."""
    parser = build_parser(arguments)
    chosen = _chosen(arguments)
    said = parser
    try:
        if chosen is not None:
            said = parser.commands[chosen]
            said.check(chosen, arguments[arguments.index(chosen) + 1 :])
        args, extras = parser.parse_known_args(arguments)
        if extras:  # said under the command's usage, not evalgate's
            said.error("unrecognized arguments: " + " ".join(extras))
    except SystemExit as done:  # --help, --version or a usage error, printed: its code stands
        return (done.code if isinstance(done.code, int) else int(ExitCode.USAGE)), False
    if getattr(args, "_command", None) is None:
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE), False
    recorded = args._name in RECORDING and not args.print_config
    return _command(args), recorded


def _command(args: argparse.Namespace) -> int:
    _configure_logging(args.verbose)
    scrub.configure(*credentials_environment())  # a command with settings adds its own flags
    stop.began()
    try:
        with stop.stop_signals_interrupt():
            if args.print_config:
                from evalgate.cli import arguments as flags

                loaded = flags.load_from_args(args)
                for row in flags.print_config(loaded, args._name):
                    print(row)
                return int(ExitCode.PASS)
            return int(args._command(args))
    except KeyboardInterrupt as interrupt:
        return _aborted(interrupt)
    except Exception as exc:
        wrapped = interrupt_within(exc)
        if wrapped is not None:  # the stop signal, wrapped on its way
            return _aborted(wrapped)
        if args.verbose:
            logging.getLogger("evalgate").exception("traceback")
        if isinstance(exc, ImportError | MemoryError):  # a memory limit, not a bug
            from evalgate.evidence.artifacts import refused_load

            exc = refused_load(f"in evalgate {args._name}", exc)
        if isinstance(exc, UsageError) and exc.with_usage:
            print(args._usage, end="", file=sys.stderr)
        if isinstance(exc, EvalgateError):
            print(line("{}: {}", type(exc).__name__, exc.message), file=sys.stderr)
            return int(exc.exit_code)
        print(  # never exit 1 ("below threshold") for a crash
            line(
                "InternalError: unexpected {}: {}. Rerun with -v for the traceback, and please "
                "report it.",
                type(exc).__name__,
                exc,
            ),
            file=sys.stderr,
        )
        return int(ExitCode.EVAL)


def _aborted(interrupt: KeyboardInterrupt) -> int:
    by = f" by {interrupt.args[0]}" if interrupt.args else ""
    print(f"AbortedError: interrupted{by}", file=sys.stderr)
    return int(ExitCode.ABORTED)


def end(code: int) -> NoReturn:
    """A normal exit's steps (threads waited for, exit handlers run, streams flushed) with
    `code`, without taking the interpreter apart."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # a profiler or debugger writes its report in the teardown
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or gone: nothing left to say
            stream.flush()
    os._exit(code)  # no teardown of lm-eval's heap: saves a run over 0.3 s (BENCHMARKS.md)
