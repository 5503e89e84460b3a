"""What images for a VLM cost, per size: rendering, encoding, bytes on the wire, prompt tokens.

    MUJOCO_GL=osmesa .venv/bin/python bench/bench_images.py [--sizes 128,224,448,512,896] [--repeats 5]

For each square render size: LIBERO-PRO's render time per camera (one simulation, libero_spatial
task 0; llvmpipe on this machine), the data-URL encoding time and size the openai brain sends
(PNG and JPEG), and the prompt tokens one such image costs each model family
(motormind/grounding/image_sizing.py). An episode with a VLM renders two cameras about 25 times
(every look of the Planner, Executor and Verifier), so the render column times 50 is the
episode's render cost at that size. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "osmesa")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,224,448,512,896")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--suite", default="libero_spatial")
    ap.add_argument("--task", type=int, default=0)
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]

    from motormind.grounding.image_sizing import RULES, fit
    from motormind.brains.openai_brain import image_data_url
    from motormind.sim.libero_pro import LiberoRobot

    rows = []
    for s in sizes:
        robot = LiberoRobot(a.suite, a.task, 0, image_size=s)      # as an episode at that size builds it
        try:
            cams = robot.camera_names
            robot.observe(images=True)                    # the first render builds the GL buffers
            t_render = []
            for _ in range(a.repeats):
                t = time.perf_counter()
                img = robot.observe(images=True).images[cams[0]]
                t_render.append((time.perf_counter() - t) / len(cams))
        finally:
            robot.close()
        enc = {}
        for fmt in ("png", "jpeg"):
            t = time.perf_counter()
            for _ in range(a.repeats):
                url = image_data_url(img, None, fmt)
            enc[fmt] = ((time.perf_counter() - t) / a.repeats, len(url))
        tokens = {r: fit(r, s, s, s, "low" if r == "openai" else "auto").tokens for r in RULES if r != "generic"}
        rows.append((s, statistics.median(t_render), enc, tokens))
        print(f"{s:4d} px: render {statistics.median(t_render) * 1000:7.1f} ms/camera, "
              f"png {enc['png'][0] * 1000:6.1f} ms {enc['png'][1] / 1024:7.1f} KiB, "
              f"jpeg {enc['jpeg'][0] * 1000:6.1f} ms {enc['jpeg'][1] / 1024:6.1f} KiB", flush=True)
    fams = [r for r in RULES if r != "generic"]
    print("\n| size px | render ms/camera | render s/episode (50) | PNG ms | PNG KiB | JPEG ms | JPEG KiB | "
          + " | ".join(f"{f} tokens" for f in fams) + " |")
    print("|" + "---|" * (7 + len(fams)))
    for s, r, enc, tok in rows:
        print(f"| {s} | {r * 1000:.1f} | {r * 50:.1f} | {enc['png'][0] * 1000:.1f} | {enc['png'][1] / 1024:.1f} | "
              f"{enc['jpeg'][0] * 1000:.1f} | {enc['jpeg'][1] / 1024:.1f} | " + " | ".join(str(tok[f]) for f in fams) + " |")
    print("\n(tokens: what the family's processor makes of one square image of that size; openai at detail low. "
          "The data URL is base64, 4/3 of the encoded bytes.)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
