"""`llmdeck tune`'s inputs that a user gets wrong or that would turn data into commands or leak a
secret: each refused with exit 2 before any server starts, never written as given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from llmdeck.errors import UsageError


def _request(tmp_path: Path, *, overrides: dict[str, Any] | None = None, **options: Any) -> Any:
    from llmdeck.settings import Settings
    from llmdeck.tune.request import make_request

    settings = Settings(state_dir=tmp_path / "s", cache_dir=tmp_path / "c")
    return make_request(
        settings, model="Qwen3-0.6B", spec_file=None, workload="agent", prompts=None, slo="ttft_p99=2s",
        budget="10m", trials=2, extra_args=[], spec_overrides=overrides or {"engine": "venv"}, load={},
        options={"machine": "h200", **options},
    )  # fmt: skip


@pytest.mark.parametrize("image", ["-v/:/x", "--privileged", "vllm latest"])
def test_a_docker_image_that_docker_would_read_as_an_option_is_refused(tmp_path: Path, image: str) -> None:
    """`tune --engine docker --image -v/:/x` (as `plan`/`up`) rendered `docker run ... -v/:/x vllm
    serve ...`: a mount of the host's / and the image `vllm`, in every trial."""
    with pytest.raises(UsageError, match="is not an image name"):
        _request(tmp_path, overrides={"engine": "docker", "image": image})


def test_plan_refuses_the_same_image(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "Qwen3-0.6B", "--machine", "h200", "--engine", "docker", "--image", "-v/:/x"]
    code, out, err = run_cli(args, capsys)
    assert code == 2 and "is not an image name" in err and "-v/:/x vllm" not in out


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("--max-num-seqs abc", "--max-num-seqs needs a whole number, got 'abc'"),
        ("--max-num-seqs=0", "--max-num-seqs 0 is out of range"),
        ("--max-num-sequences 8", "has a --max-num-sequences flag"),
        ("--kv-cache-dtype fp9", "'fp9' is not one of vLLM's choices"),
        ("--hf-overrides {nope", "is not valid JSON"),
    ],
)
def test_a_candidate_vllm_would_refuse_is_refused_before_the_baseline(
    tmp_path: Path, given: str, says: str
) -> None:
    """It had been taken as given: the tune ran the baseline trial (minutes) and only then started this
    candidate's server, which died at once on the value or the flag."""
    with pytest.raises(UsageError) as info:
        _request(tmp_path, candidates=[given])
    assert f"--candidate {given!r}: " in info.value.message and says in info.value.message
    _request(tmp_path, candidates=["--max-num-seqs 8 --max-num-batched-tokens 4096 --enable-prefix-caching"])


@pytest.mark.parametrize("given", ["--max-num-seqs 8 --api-key sk-cand-77", "--hf-token=hf_cand77"])
def test_a_secret_in_a_candidate_is_refused_not_written(tmp_path: Path, given: str) -> None:
    """`--candidate '--api-key K'` kept K in the request: the trials file's header, the trial's args
    and params, and spec.json had it in the clear (the base's `-- --api-key` is split out; this was
    not)."""
    with pytest.raises(UsageError) as info:
        _request(tmp_path, candidates=[given])
    said = f"{info.value} {info.value.hint}"
    assert "a secret" in said and "after `--`" in said and "77" not in said


def test_a_misspelt_flag_after_dashes_is_refused_once_not_per_trial(tmp_path: Path) -> None:
    """`tune ... -- --max-num-sequences 8` ran the whole space, each trial "rejected by plan:
    flag-unknown" (13 lines), then exit 1; the same flag is in every trial, so it is exit 2 up front."""
    from llmdeck.settings import Settings
    from llmdeck.tune.request import make_request

    settings = Settings(state_dir=tmp_path / "s", cache_dir=tmp_path / "c")
    with pytest.raises(UsageError) as info:
        make_request(
            settings, model="Qwen3-0.6B", spec_file=None, workload="agent", prompts=None, slo="ttft_p99=2s",
            budget="10m", trials=2, extra_args=["--max-num-sequences", "8"],
            spec_overrides={"engine": "venv"}, load={}, options={"machine": "h200"},
        )  # fmt: skip
    assert "The vLLM flags after `--`: " in info.value.message and "--max-num-seqs" in str(info.value.hint)


def test_a_flag_no_known_vllm_has_and_nothing_resembles_is_left_to_the_trials(tmp_path: Path) -> None:
    """A name no release in the table has and no known flag resembles may be a newer vLLM's (plan's lint
    warns, it does not refuse): tune takes it, as `up` and `plan` do; a misspelling (a near name) is the
    exit 2 above."""
    from llmdeck.tune.request import _check_flags

    _check_flags("--candidate", ["--some-flag-of-a-later-vllm", "1"])
    with pytest.raises(UsageError):
        _check_flags("--candidate", ["--max-num-seqz", "4"])
