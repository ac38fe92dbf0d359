"""Delaunay triangulations of the Sia simulator's throughput points.

The Sia artifact (siasosp23/artifacts @ aaf7a0de, `sia-simulator/applications.py`)
builds one `Application(trace_dir, cluster_suffix)` per application and GPU
type and interpolates an unmeasured placement with scipy's
`LinearNDInterpolator` over (num_nodes, num_replicas, local_bsz) exactly as
the Pollux simulator does; `src/profile/data/pollux/delaunay.py` explains why
dlsched stores scipy's triangulation rather than recomputing it. This script
does the same for the Sia GPU types whose measurements are not Pollux's
(`aws`, the T4 files, are byte-identical to Pollux's: dlsched uses the Pollux
tables and triangulations for them):

    python3 -m venv /tmp/sia-venv
    /tmp/sia-venv/bin/pip install numpy==1.23.5 pandas==1.5.3 scipy==1.10.1
    /tmp/sia-venv/bin/python src/profile/data/sia/delaunay.py ../shared/profiles/sia

(the versions of the Pollux tables; Sia's `requirements.txt` pins numpy~=1.23.0
and needs a pandas before 2.0 for `DataFrame.append`). Writes beside this file:

- `delaunay-<gpu>-<app>.csv`: `a,b,c,d,plane`, the tetrahedra of one GPU
  suffix and application in scipy's order, `plane` as in the Pollux tables
  (the first non-flat tetrahedron on the same lifted hyperplane, within 1e-9);
- `planes.csv`: `gpu,app,simplex,n0,n1,n2,n3,offset`, scipy's hyperplanes of
  flat tetrahedra without a non-flat twin;
- `paraboloid.csv`: `gpu,app,scale,shift`, the lifting.

A point set Qhull cannot triangulate (all points in one plane: the `quad`
measurements are of one node only) gets a header without rows, and no row
in `paraboloid.csv`: scipy raises there, so the
simulator can only rate that type's measured placements, and so can dlsched.

Points, in this order (`Application.get_throughput`): placements-<gpu>.csv
grouped by (num_nodes, num_replicas, local_bsz), sorted, times averaged; then
scalability-<gpu>.csv in file order (columns read by name: their order
differs between files).

Re-running gives byte-identical files.
"""

import os
import sys

import numpy as np
import pandas
from scipy.spatial import Delaunay
from scipy.spatial import QhullError

APPS = ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"]
GPUS = ["azure", "dgx-ext", "quad", "rtx"]
KEY = ["num_nodes", "num_replicas", "local_bsz"]
TIMES = ["step_time", "sync_time"]


def points(app_dir, gpu):
    """The interpolation points of one application on one GPU type."""
    meas = pandas.read_csv(os.path.join(app_dir, f"placements-{gpu}.csv"))
    digits = meas["placement"].astype(str)
    meas["num_nodes"] = digits.str.len()
    meas["num_replicas"] = digits.apply(lambda s: sum(int(c) for c in s))
    grouped = meas.groupby(KEY, sort=True)[TIMES].mean().reset_index()
    scal = pandas.read_csv(os.path.join(app_dir, f"scalability-{gpu}.csv"))
    both = pandas.concat([grouped[KEY + TIMES], scal[KEY + TIMES]], ignore_index=True)
    return both[KEY].values.astype(float)


def main(src):
    out_dir = os.path.dirname(os.path.abspath(__file__))
    lift = ["gpu,app,scale,shift\n"]
    planes = ["gpu,app,simplex,n0,n1,n2,n3,offset\n"]
    for gpu in GPUS:
        for app in APPS:
            pts = points(os.path.join(src, app), gpu)
            tets = ["a,b,c,d,plane\n"]
            out = os.path.join(out_dir, f"delaunay-{gpu}-{app}.csv")
            try:
                tri = Delaunay(pts)
            except QhullError as e:
                first = str(e).strip().splitlines()[0]
                print(f"{gpu} {app}: {len(pts)} points, no triangulation ({first})")
                with open(out, "w", newline="\n") as f:
                    f.writelines(tets)
                continue
            flat = np.isnan(tri.transform[:, 0, 0])
            reps = []
            for i, s in enumerate(tri.simplices):
                plane = ""
                eq = tri.equations[i]
                same = [j for j in reps if np.abs(tri.equations[j] - eq).max() <= 1e-9]
                if same:
                    plane = str(int(same[0]))
                elif not flat[i]:
                    reps.append(i)
                else:
                    numbers = ",".join(repr(float(e)) for e in eq)
                    planes.append(f"{gpu},{app},{i},{numbers}\n")
                tets.append(",".join(str(int(v)) for v in s) + "," + plane + "\n")
            with open(out, "w", newline="\n") as f:
                f.writelines(tets)
            lift.append(f"{gpu},{app},{tri.paraboloid_scale!r},{tri.paraboloid_shift!r}\n")
            print(f"{gpu} {app}: {len(tri.points)} points, {len(tri.simplices)} tetrahedra ({int(flat.sum())} flat)")
    for name, lines in [("paraboloid.csv", lift), ("planes.csv", planes)]:
        with open(os.path.join(out_dir, name), "w", newline="\n") as f:
            f.writelines(lines)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/profiles/sia")
