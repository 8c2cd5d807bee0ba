"""Write the expenses per category: python build_report.py EXPENSES.csv REPORT.txt"""

import sys

from ledger.parse import read_expenses
from ledger.summary import format_report, totals_by_category


def main(argv):
    src, dst = argv[1], argv[2]
    expenses = read_expenses(src)
    with open(dst, "w", encoding="utf-8") as fh:
        fh.write(format_report(totals_by_category(expenses)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
