"""llmdeck.checks: is this endpoint ready for my agent? (`llmdeck check`)"""

from llmdeck.checks.render import print_report, report_table
from llmdeck.checks.report import CheckReport, ProbeResult, ServerFacts
from llmdeck.checks.run import run_checks
from llmdeck.checks.target import Target, resolve_target

__all__ = [
    "CheckReport",
    "ProbeResult",
    "ServerFacts",
    "Target",
    "print_report",
    "report_table",
    "resolve_target",
    "run_checks",
]
