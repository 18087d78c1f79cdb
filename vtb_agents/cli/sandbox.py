"""``vtb sandbox exec``: run code exactly as the model's python_image_processing call would."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

import typer

from vtb_agents.cli.common import cli_app, fail, out
from vtb_agents.defaults import DEFAULT_CODE_TIMEOUT_S, DEFAULT_SANDBOX

sandbox_app = cli_app(help="Run code in the sandbox the model's tools use.", no_args_is_help=True)


@sandbox_app.command("exec")
def sandbox_exec(code_file: Path = typer.Option(..., "--code-file", help="Python file to run."),
                 image: list[Path] = typer.Option([], "--image",
                                                  help="Images, placed as image_0.png, image_1.png, ..."),
                 workdir: Optional[Path] = typer.Option(None,
                                                        help="Working directory to use and keep (default: temporary)."),
                 timeout: float = typer.Option(DEFAULT_CODE_TIMEOUT_S, min=0.001,
                                               help="Seconds before the call is stopped."),
                 as_json: bool = typer.Option(False, "--json", help="Print the ExecResult as one JSON object."),
                 sandbox: str = typer.Option(DEFAULT_SANDBOX, help=(
                     "Where code runs: local, e2b, 'module:Class' or an installed sandbox (`vtb sandboxes`).")),
                 strict: bool = typer.Option(False, "--sandbox-strict", help="Refuse to run without full isolation."),
                 ) -> None:
    """Run CODE_FILE in a fresh sandbox with the given images; print what the tool would report."""
    # the sandbox and PIL load only here (`vtb --help` mounts this command); the tools' helpers come
    # from their light modules, so running code imports no LangChain
    from vtb_agents.artifacts import ArtifactStore, to_png
    from vtb_agents.sandbox import SandboxError, backend, open_sandbox
    from vtb_agents.sandbox.base import sandbox_settings
    from vtb_agents.tools.images import collect_images, with_refusals
    from vtb_agents.terminal import safe, safe_json
    from vtb_agents.tools.limits import MAX_CODE_CHARS

    try:
        backend(sandbox)
    except ValueError as exc:
        fail(f"--sandbox: {exc}")
    try:
        code = code_file.read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read --code-file {code_file}: {exc.strerror or exc}")
    if len(code) > MAX_CODE_CHARS:
        fail(f"{code_file} has {len(code):,} characters; a tool call carries at most {MAX_CODE_CHARS:,}")
    try:
        pngs = [to_png(path.read_bytes()) for path in image]
    except OSError as exc:
        fail(f"cannot read --image: {exc}")
    # one sandbox per command: a fork server (a run's) would only add its own start
    options = {"strict": strict, "fork_server": False} if sandbox == "local" else {}
    try:
        with open_sandbox(sandbox, workdir=workdir, **options) as box, tempfile.TemporaryDirectory() as scratch:
            for index, data in enumerate(pngs):
                box.put_file(f"image_{index}.png", data)
            result = box.run(code, timeout=timeout)
            collected = collect_images(box, ArtifactStore(Path(scratch)), result.new_files)
            result, images = with_refusals(result, collected.refused), collected.images
            confinement = sandbox_settings(box)
    except (SandboxError, ValueError) as exc:
        fail(str(exc))
    isolation = confinement["sandbox_isolation"]
    payload = {**result.to_dict(), "isolation": isolation,
               "memory_cap": confinement["sandbox_memory_cap"],
               "syscall_filter": confinement["sandbox_syscall_filter"],
               "images": [{"name": i["name"], "size": i["size"]} for i in images]}
    if as_json:
        print(safe_json(payload, ensure_ascii=False))
    else:
        out.print(f"ok: {result.ok}  isolation: {isolation}  {result.duration_s:.3f} s", highlight=False)
        for label in ("stdout", "stderr"):
            if payload[label]:
                out.print(safe(f"--- {label}\n{payload[label]}"), highlight=False, markup=False)
        if result.error:
            out.print(safe(f"error: {result.error}"), highlight=False, markup=False)
        for entry in payload["images"]:
            out.print(safe(f"new image: {entry['name']} {entry['size'][0]}x{entry['size'][1]}"), highlight=False,
                      markup=False)
    if not result.ok:
        raise typer.Exit(1)
