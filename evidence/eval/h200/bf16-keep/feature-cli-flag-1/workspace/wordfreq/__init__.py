"""Word counts of a text file."""
