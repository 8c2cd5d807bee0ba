"""The HTML report (`llmdeck report --html`, `llmdeck bench --html`): one self-contained page.

``view`` builds pydantic view models from result files (the numbers, with the JSON path each came
from), ``sweep`` and ``diff`` the sweep and comparison views, ``charts`` draws them with matplotlib
to inline SVG, and ``page`` renders the jinja2 template and writes the file atomically.
"""
