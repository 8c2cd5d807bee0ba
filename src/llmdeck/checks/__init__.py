"""llmdeck.checks: is this endpoint ready for my agent? (`llmdeck check`)"""

from llmdeck.checks.render import print_report, report_table
from llmdeck.checks.report import CheckReport, ProbeResult, ServerFacts
from llmdeck.checks.run import run_checks

__all__ = [
    "CheckReport",
    "ProbeResult",
    "ServerFacts",
    "print_report",
    "report_table",
    "run_checks",
]
