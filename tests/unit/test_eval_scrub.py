"""The eval's scrub of secrets (evals/agentbase.scrub_secrets, util/redact.redact_text) on large text: every
secret still hidden, and in time linear in the text. It runs synchronously in ``run_agent``'s ``finally``
(after the agent exited and its wall time was taken, no deadline pending), so its time is the event loop's
blocked time; three of redact_text's patterns were quadratic in a run of dashes or of "-a", up to 3 s
for one 4,000-character transcript entry."""

from __future__ import annotations

import time

import pytest

from llmdeck.evals.agentbase import TEXT_CAP, scrub_secrets
from llmdeck.evals.results import AgentRun, TranscriptEntry
from llmdeck.util.redact import REDACTED, redact_text

KEY = "sk-llmdeck-0123456789abcdef0123"
SECRETS = {
    KEY,
    "hf_abcdefghijklmnopqrstuvwxyz012345",
    "eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "hunter2-password-value",
    "s3cretpass",
}
# what an agent's tool may print: a table rule, kebab-case ids, a long option list with no spaces
RUNS = ["-" * 1200, "-a" * 600, "sk-" * 400, "--x" * 400]


def _entry(i: int) -> str:
    secrets = (
        f"printenv: OPENAI_API_KEY={KEY}\nHF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345\n"
        "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig' http://u:s3cretpass@host/v1\n"
        "vllm serve m --api-key hunter2-password-value\n"
    )
    text = f"tool output {i}:\n{RUNS[i % len(RUNS)]}\n{secrets}" + "def f(x):\n    return x + 1\n" * 200
    return text[:TEXT_CAP]


def test_a_megabyte_transcript_is_scrubbed_completely_and_quickly() -> None:
    """256 entries of 4,000 characters (1 MB), each with a run that was quadratic and five secrets: none
    left, in well under a second here (before: 28 s for the same transcript on this 2-core box)."""
    run = AgentRun(client="aider", stderr_tail=_entry(1)[-3000:])
    run.transcript = [TranscriptEntry(t_s=i, prompt=0, kind="tool", text=_entry(i)) for i in range(256)]
    assert sum(len(e.text) for e in run.transcript) > 1_000_000 - 10_000
    t0 = time.monotonic()
    scrub_secrets(run, KEY)
    took = time.monotonic() - t0
    dumped = run.model_dump_json()
    assert not [s for s in SECRETS if s in dumped]
    assert dumped.count(REDACTED) >= 256 * len(SECRETS)
    assert took < 5.0, f"{took:.1f} s"


@pytest.mark.parametrize("run", ["-" * 16000, "-a" * 8000, "sk-" * 5333, "--x" * 5333, "a.-" * 5333])
def test_redact_text_is_linear_in_a_run_of_name_characters(run: str) -> None:
    """16,000 characters: milliseconds (before: 4 s for the dashes, ~45 s for "-a": every start in the
    run scanned to its end)."""
    t0 = time.monotonic()
    assert redact_text(f"{run} --api-key abc123xyz").endswith(f" --api-key {REDACTED}")
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("a--api-key abc123xyz", "a--api-key <redacted>"),  # a flag inside a run, as before
        ("x--foo--hf-token=abc123xyz", "x--foo--hf-token=<redacted>"),
        ("-x-api_key=abc123xyz", "-x-api_key=<redacted>"),
        ("'-api_key': 'abc123xyz'", "'-api_key': '<redacted>'"),
        ("see 1.x-https://u:pw@h/x", "see 1.x-https://u:<redacted>@h/x"),
        ("git+ssh://me:pw@h", "git+ssh://me:<redacted>@h"),
    ],
)
def test_the_linear_patterns_hide_what_they_hid(text: str, hidden: str) -> None:
    assert redact_text(text) == hidden
