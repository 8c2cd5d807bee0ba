"""llmdeck.checks: is this endpoint ready for my agent? (`llmdeck check`)"""

from llmdeck.checks.results import CheckReport, ProbeResult, ServerFacts
from llmdeck.checks.run import run_checks
from llmdeck.checks.table import print_report, report_table

__all__ = [
    "CheckReport",
    "ProbeResult",
    "ServerFacts",
    "print_report",
    "report_table",
    "run_checks",
]
