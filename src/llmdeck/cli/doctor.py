"""CLI command: doctor (everything preflight knows about this host, as one report)."""

from __future__ import annotations

import typer

from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import image_name, nonempty

MARKS = {"ok": "[green]  ok[/]", "warn": "[yellow]warn[/]", "fail": "[bold red]FAIL[/]"}


def register(app: typer.Typer) -> None:
    """Add this command to the root app."""

    @app.command("doctor")
    def doctor(
        ctx: typer.Context,
        python: str | None = typer.Option(
            None,
            "--python",
            callback=nonempty,
            help="The venv Python whose vLLM you will serve with (default: this one).",
        ),
        image: str | None = typer.Option(
            None, "--image", callback=image_name, help="The Docker image you will serve with."
        ),
        port: int | None = typer.Option(
            None, "--port", min=1, max=65535, help="The port a server will use (default LLMDECK_PORT)."
        ),
        json_out: bool = JSON_OPTION,
    ) -> None:
        """Check this machine before serving: OS, GPU and driver, CUDA, Docker, vLLM, Hugging Face
        variables, proxies, disk, memory, other tenants and ports. Each finding is ok, warn or fail, with
        what it means and the fix; exit 1 when one fails. Run it first on a new box.

        Examples:

          llmdeck doctor

          llmdeck doctor --python ~/vllm/.venv/bin/python --json

          llmdeck doctor --image vllm/vllm-openai:v0.22.0
        """
        from rich.markup import escape

        from llmdeck.doctor.run import DoctorOptions, run_doctor

        options = DoctorOptions(python=python, image=image, port=port)
        with err_console().status("checking ...") as status:
            report = run_doctor(
                get_settings(ctx), options, progress=lambda step: status.update(f"checking {step} ...")
            )
        if json_out:
            print_json(report)
        else:
            out = out_console()
            for f in report.findings:
                line = f"{MARKS[f.status]} [bold]{escape(f.area)}[/]: {escape(f.message)}"
                out.print(line, highlight=False)
                if f.fix and f.status != "ok":
                    out.print(f"{'':>6}fix: {f.fix}", highlight=False, markup=False)
            out.print(
                f"\n{len(report.failed)} fail, {len(report.warned)} warn, "
                f"{len(report.findings) - len(report.failed) - len(report.warned)} ok.",
                highlight=False,
            )
        if report.failed:
            raise typer.Exit(1)
