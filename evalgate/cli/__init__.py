"""The `evalgate` command. `console` first makes a stop signal end the process cleanly
(evalgate.cli.stop), then loads the rest (evalgate.cli.program): a stop that lands while
evalgate is still being imported is exit 6 too. `main` and `build_parser` are program's,
loaded on first use so that importing this package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from evalgate.cli import stop

if TYPE_CHECKING:
    from evalgate.cli.habits import SUBCOMMANDS
    from evalgate.cli.program import EPILOG, RECORDING, build_parser, main

__all__ = ["EPILOG", "RECORDING", "SUBCOMMANDS", "build_parser", "console", "main"]


def console() -> NoReturn:
    """The `evalgate` command (the console script and `python -m evalgate.cli`)."""
    stop.end_at_once()
    from evalgate.cli import program

    program.end(program.main())


def __getattr__(name: str) -> Any:
    if name in __all__:  # console is this module's own
        from evalgate.cli import program

        return getattr(program, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
