"""The command line of wordfreq."""

import argparse
import re

WORD = re.compile(r"[A-Za-z']+")


def words(text):
    return [w.lower() for w in WORD.findall(text)]


def build_parser():
    parser = argparse.ArgumentParser(prog="wordfreq", description="Count the words of a text file.")
    parser.add_argument("file", help="the text file")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    with open(args.file, encoding="utf-8") as fh:
        found = words(fh.read())
    print(len(found))
    return 0
