"""CLI group: model (make-tiny: a tiny random-weight Qwen3 for the CPU engine)."""

from __future__ import annotations

from pathlib import Path

import typer

from llmdeck.cli.output import JSON_OPTION, err_console, out_console, print_json
from llmdeck.cli.validate import nonempty, number


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    model_app = typer.Typer(
        name="model",
        help="Model folders: make a tiny test model.",
        no_args_is_help=True,
    )

    @model_app.command("make-tiny")
    def make_tiny(
        dir: str = typer.Argument(
            ...,
            callback=nonempty,
            metavar="DIR",
            help="Directory to write the model into (created if missing).",
        ),
        force: bool = typer.Option(
            False, "--force", help="Replace a model llmdeck made in DIR (a folder of your files is refused)."
        ),
        layers: int = typer.Option(2, "--layers", help="Number of decoder layers."),
        hidden: int = typer.Option(128, "--hidden", help="Hidden size (a multiple of 32)."),
        seed: int = typer.Option(0, "--seed", help="Random seed for the weights."),
        eos_bias: float | None = typer.Option(
            None,
            "--eos-bias",
            callback=number(at_least=0, at_most=4),
            help="Make replies end on their own (0.8: ~1 token at temperature 0.6, ~130 at 1.0), for real "
            "agents that fail a reply cut at max_tokens.",
        ),
        json_out: bool = JSON_OPTION,
    ) -> None:
        """Make a tiny random-weight Qwen3ForCausalLM with a real Qwen3 tokenizer (needs the cpu extra).

        Examples:

          llmdeck model make-tiny ./tiny

          llmdeck model make-tiny ./tiny-eos --eos-bias 0.8   # replies that stop (Claude Code, Codex)
        """
        from llmdeck.model.tiny import make_tiny_model

        err_console().print(f"Making a tiny Qwen3 model in {dir} ...", highlight=False, markup=False)
        info = make_tiny_model(
            Path(dir), force=force, layers=layers, hidden=hidden, seed=seed, eos_bias=eos_bias
        )
        if json_out:
            print_json(info)
            return
        out_console().print(
            f"Made {info.architecture} in {info.path}: {info.layers} layers, hidden {info.hidden_size}, "
            f"vocab {info.vocab_size}, {info.parameters / 1e6:.1f} M parameters ({info.dtype}); "
            f"tokenizer matches tiktoken on {info.tokenizer_checked_strings} checks; {info.seconds:.1f} s.",
            highlight=False,
        )

    app.add_typer(model_app)
