"""Delaunay triangulations of the Pollux simulator's throughput points.

Writes `delaunay-<app>.csv` beside this file: the tetrahedra (columns a, b, c,
d: indices into the application's interpolation points, 0-based), in scipy's
order, of the triangulation that scipy's `LinearNDInterpolator` builds (Qhull,
options "Qbb Qc Qz Q12 Qt") over the points (num_nodes, num_replicas,
local_bsz). Qt leaves flat (zero-volume) tetrahedra where Qhull merged
co-spherical points, and the tetrahedra on the two sides of a flat one need
not share a face, so scipy's value on such a face depends on which side its
point location walks from; dlsched repeats that walk, which needs the lifted
(paraboloid) hyperplane of every tetrahedron, and the exact ties Qhull has
between the pieces of one merged facet: column `plane` names the first
non-flat tetrahedron on the same hyperplane (scipy's equations within 1e-9)
when there is an earlier one (empty: its own four lifted corners define it);
the few flat ones that share no non-flat one's hyperplane have scipy's
hyperplane (unit normal n0..n3, offset) in `planes.csv`. `paraboloid.csv` gives
the lifting, `z = |x|^2 * scale + shift` (scipy's `paraboloid_scale`,
`paraboloid_shift`). The points, in this order:

1. placements.csv grouped by (num_nodes, num_replicas, local_bsz), sorted by
   that key, step_time and sync_time averaged (num_nodes = digits of the
   placement id, num_replicas = their sum);
2. then the rows of scalability.csv in file order.

`src/profile/pollux.rs` builds the same list (`Application::points`),
locates a point as scipy does and interpolates barycentrically. Qhull's choice among the
equally valid triangulations of a degenerate (co-spherical) point set is not
reproducible without Qhull, so the triangulation is computed here, once, with
the versions the Pollux artifact's simulator runs on:

    python3 -m venv /tmp/pollux-venv
    /tmp/pollux-venv/bin/pip install numpy==1.23.5 pandas==1.5.3 scipy==1.10.1
    /tmp/pollux-venv/bin/python src/profile/data/pollux/delaunay.py ../shared/profiles/pollux

Re-running gives byte-identical files.
"""

import os
import sys

import numpy as np
import pandas
from scipy.spatial import Delaunay

APPS = ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"]
KEY = ["num_nodes", "num_replicas", "local_bsz"]
TIMES = ["step_time", "sync_time"]


def points(app_dir):
    """The interpolation points of one application, in the order above."""
    meas = pandas.read_csv(os.path.join(app_dir, "placements.csv"))
    digits = meas["placement"].astype(str)
    meas["num_nodes"] = digits.str.len()
    meas["num_replicas"] = digits.apply(lambda s: sum(int(c) for c in s))
    grouped = meas.groupby(KEY, sort=True)[TIMES].mean().reset_index()
    scal = pandas.read_csv(os.path.join(app_dir, "scalability.csv"))
    both = pandas.concat([grouped[KEY + TIMES], scal[KEY + TIMES]], ignore_index=True)
    return both[KEY].values.astype(float)


def main(src):
    out_dir = os.path.dirname(os.path.abspath(__file__))
    lift = ["app,scale,shift\n"]
    planes = ["app,simplex,n0,n1,n2,n3,offset\n"]
    for app in APPS:
        tri = Delaunay(points(os.path.join(src, app)))
        flat = np.isnan(tri.transform[:, 0, 0])
        solid = np.where(~flat)[0]
        with open(os.path.join(out_dir, f"delaunay-{app}.csv"), "w", newline="\n") as f:
            f.write("a,b,c,d,plane\n")
            reps = []  # non-flat tetrahedra whose hyperplane comes first
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
                    planes.append(f"{app},{i},{numbers}\n")
                f.write(",".join(str(int(v)) for v in s) + "," + plane + "\n")
        lift.append(f"{app},{tri.paraboloid_scale!r},{tri.paraboloid_shift!r}\n")
        print(f"{app}: {len(tri.points)} points, {len(tri.simplices)} tetrahedra ({int(flat.sum())} flat)")
    with open(os.path.join(out_dir, "paraboloid.csv"), "w", newline="\n") as f:
        f.writelines(lift)
    with open(os.path.join(out_dir, "planes.csv"), "w", newline="\n") as f:
        f.writelines(planes)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/profiles/pollux")
