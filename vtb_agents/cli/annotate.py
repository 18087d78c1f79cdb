"""``vtb annotate RUN_DIR``: label a run's rubrics by hand in a local page (see :mod:`vtb_agents.annotate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vtb_agents.cli.common import cli_app, fail

annotate_cli = cli_app()


@annotate_cli.command("annotate")
def annotate(run_dir: Path = typer.Argument(..., help="A run directory written by `vtb run`."),
             labels: Optional[Path] = typer.Option(None, help="Labels file, JSON lines (default: "
                                                              "RUN_DIR/human_labels.jsonl); resumed if it exists."),
             port: int = typer.Option(8765, min=0, max=65535, help="Port on 127.0.0.1 (0: any free port)."),
             tasks: Optional[str] = typer.Option(None, "--tasks", help="Task source (default: the run's own)."),
             ) -> None:
    """Serve a labelling page on 127.0.0.1: met / not met per rubric, saved at each click for
    `vtb analyze alignment --labels`. Stop with Ctrl-C; starting again resumes where you stopped."""
    from vtb_agents.annotate.labels import LABELS_FILE
    from vtb_agents.annotate.server import AnnotationSession, make_server
    from vtb_agents.rundir.errors import RunError

    labels_path = labels or run_dir / LABELS_FILE
    try:
        session = AnnotationSession.open(run_dir, labels_path, tasks)
        server = make_server(session, port)
    except (RunError, ValueError, OSError) as exc:
        fail(str(exc))
    state = session.state()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    print(f"annotating {run_dir} at {url} ({len(state['labels'])} of {state['total']} rubric(s) labelled; "
          f"labels in {labels_path}); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
