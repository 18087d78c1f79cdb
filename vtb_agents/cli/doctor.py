"""``vtb doctor``: the checks ``vtb run`` makes before its first task, run alone and shown in full.

Every part of a run with the given options is built once and checked (:mod:`vtb_agents.runner.preflight`):
the judge, each tool, the strategy (and a user's agent), and the sandbox, which runs the canary cell.
It prints each check, the isolation the sandbox reached and the library versions here and inside
the sandbox; each failed check is one ``error:`` line, and the exit status is 1 if any failed.
"""

from __future__ import annotations

import typer

from vtb_agents.cli.common import cli_app, err, fail, out, print_error
from vtb_agents.cli.options import CONFIG_FLAGS, config_option, flag

doctor_cli = cli_app()


@doctor_cli.command("doctor")
def doctor(model: str = config_option("model"), judge: str = config_option("judge"),
           strategy: str = config_option("strategy"),
           extra_tools: list[str] = typer.Option([], CONFIG_FLAGS["extra_tools"], help=(
               "A tool to add, 'module:attr' or an installed tool's name (repeatable), as `vtb run --tool`.")),
           sandbox: str = config_option("sandbox"), sandbox_strict: bool = config_option("sandbox_strict"),
           sandbox_network: bool = config_option("sandbox_network"),
           prompt_level: str = config_option("prompt_level"),
           tools: bool = typer.Option(True, "--tools/--no-tools", help="Check a run with tools (--no-tools: none)."),
           vision_tool: bool = typer.Option(True, "--vision-tool/--no-vision-tool",
                                            help="Check a run offering python_image_processing."),
           ) -> None:
    """Check the parts of a run before running it: judge, tools, strategy or agent, and the sandbox
    (a canary cell: PIL, NumPy, OpenCV). Prints the isolation reached and library versions; exit 1
    if any check fails (`vtb run` makes the same checks and refuses to start)."""
    from vtb_agents.config import RunOptionError, run_config
    from vtb_agents.runner.preflight import SANDBOX_FACTS, doctor_checks, host_libraries

    try:
        config = run_config(model=model, judge=judge, strategy=strategy, extra_tools=tuple(extra_tools),
                            sandbox=sandbox, sandbox_strict=sandbox_strict, sandbox_network=sandbox_network,
                            prompt_level=prompt_level, no_tools=not tools, no_vision_tool=not vision_tool)
    except RunOptionError as exc:
        fail(exc.render(flag))
        raise  # unreachable: fail() exits
    checks = doctor_checks(config)
    for check in checks:
        if check.problem is not None:
            shown = (check.part or "the run's specs") + " (see the error below)"
        else:
            shown = check.part + ("" if check.kind == "sandbox" or not check.facts else
                                  f"  ({', '.join(f'{k}: {v}' for k, v in check.facts.items())})")
        out.print(f"{'ok    ' if check.problem is None else 'FAILED'}  {shown}", highlight=False, markup=False,
                  soft_wrap=True)
    checked_box = next((c for c in checks if c.kind == "sandbox" and c.problem is None), None)
    if checked_box is not None:
        out.print(f"{checked_box.part}:", highlight=False, markup=False)
        for name in SANDBOX_FACTS:
            out.print(f"  {name}: {checked_box.facts.get(name, 'unknown')}", highlight=False, markup=False,
                      soft_wrap=True)
    out.print("libraries (here / in the sandbox):", highlight=False)
    for name, here in host_libraries().items():
        there = checked_box.libraries.get(name, "-") if checked_box is not None else "-"
        out.print(f"  {name}: {here} / {there}", highlight=False, markup=False)
    failed = [check for check in checks if check.problem is not None]
    for check in failed:
        print_error(check.line)
    if failed:
        err.print(f"{len(failed)} check(s) failed: `vtb run` with these options would refuse to start",
                  highlight=False, markup=False)
        raise typer.Exit(1)
    out.print(f"all {len(checks)} check(s) passed", highlight=False)
