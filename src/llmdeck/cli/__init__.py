"""The command line: thin commands over the library, registered in ``app.py``."""
