"""The command line of wordfreq."""

import argparse
import re
from collections import Counter

WORD = re.compile(r"[A-Za-z']+")


def words(text):
    return [w.lower() for w in WORD.findall(text)]


def build_parser():
    parser = argparse.ArgumentParser(prog="wordfreq", description="Count the words of a text file.")
    parser.add_argument("file", help="the text file")
    parser.add_argument("--top", type=positive_int, metavar="N", help="print the N most frequent words")
    return parser


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def top_words(found, n):
    counts = Counter(found)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def main(argv=None):
    args = build_parser().parse_args(argv)
    with open(args.file, encoding="utf-8") as fh:
        found = words(fh.read())
    if args.top is None:
        print(len(found))
        return 0
    for word, count in top_words(found, args.top):
        print(f"{word} {count}")
    return 0
