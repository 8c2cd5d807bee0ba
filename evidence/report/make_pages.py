"""Render the example pages from the committed CPU-engine results and screenshot them in headless
chromium, at a laptop's width (1280 px) and a phone's (390 px); PNGs are palette-quantised to stay small.

    PYTHONPATH=src python evidence/report/make_pages.py

Pages: seeds.html (`bench --suite seeds`, from results/seeds.json), seeds-h200.html (the same suite on an
H200, from benchmarks/results/bench_h200-seeds.json), compare.html (the same repeated
scenario on --max-num-seqs 16 and 2), and a concurrency sweep's page (only its screenshot is kept:
sweep.png). Needs chromium and Pillow (matplotlib's dependency).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PAGES = {
    "seeds": ["seeds.json"],
    "sweep": ["sweep.json"],
    "compare": ["cmp-seqs16.json", "cmp-seqs2.json"],
    # the H200 run (evidence/device/serving-layer): the seeds' suite on the seeds' coding model shape
    "seeds-h200": ["../../../benchmarks/results/bench_h200-seeds.json"],
}
SHOTS = {"seeds": (1280, 3000), "compare": (1280, 2300), "sweep": (1280, 1500), "seeds-h200": (1280, 3000)}
PHONE = ("seeds", "compare")
KEPT = ("seeds", "compare", "seeds-h200")  # pages committed; the others are rendered to a temp folder


def shoot(page: Path, png: Path, width: int, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    from PIL import Image

    with Image.open(png) as im:
        im.convert("RGB").quantize(colors=64).save(png, optimize=True)


def main() -> None:
    sys.path.insert(0, str(HERE.parents[1] / "src"))
    from llmdeck.bench.html.page import write_report
    from llmdeck.bench.result_file import load_result

    for name, files in PAGES.items():
        paths = [(RESULTS / f).resolve() for f in files]
        if not all(p.is_file() for p in paths):
            print(f"skip {name}: missing {[str(p) for p in paths if not p.is_file()]}")
            continue
        out = (HERE if name in KEPT else Path(tempfile.mkdtemp())) / f"{name}.html"
        rel = [str(p.relative_to(HERE.parents[1])) for p in paths]
        size = write_report([load_result(p) for p in paths], rel, out)
        shots = [(SHOTS[name], f"{name}.png")]
        if name in PHONE:
            shots.append(((390, 2400), f"{name}-phone.png"))
        for (w, h), png in shots:
            shoot(out, HERE / png, w, h)
        print(f"{out.name}: {size / 1024:.0f} kB; " + ", ".join(png for _, png in shots))


if __name__ == "__main__":
    main()
