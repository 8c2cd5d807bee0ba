"""Reading expenses from CSV (date,category,amount)."""

import csv


def parse_amount(text):
    """An amount such as ``12`` or ``12.50``, exact (no binary floating point)."""
    return int(text.strip())


def read_expenses(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return [
            {"date": row["date"], "category": row["category"].strip(), "amount": parse_amount(row["amount"])}
            for row in csv.DictReader(fh)
        ]
