"""Totals per category and the report text."""


def totals_by_category(expenses):
    totals = {}
    for e in expenses:
        totals[e["category"]] = totals.get(e["category"], 0) + e["amount"]
    return totals


def format_report(totals):
    lines = [f"{cat}: {totals[cat]:.2f}" for cat in sorted(totals)]
    lines.append(f"total: {sum(totals.values()):.2f}")
    return "\n".join(lines) + "\n"
