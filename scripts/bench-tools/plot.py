"""Plots a scripts/bench JSON report: throughput and p99 latency per workload, Ubiquity next to
its anchors (log scales: the systems differ by orders of magnitude).

    python plot.py REPORT.json OUT.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

WORKLOADS = ["ping", "point-fetch", "save100", "predicate-fetch", "pinned-fetch", "fanout"]
TITLES = {"ping": "W0 ping", "point-fetch": "W1 point fetch", "save100": "W2 100-object save",
          "predicate-fetch": "W3 predicate fetch", "pinned-fetch": "W4 pinned fetch",
          "fanout": "W5 fan-out (saves/s; p99 from ack)"}


def main() -> None:
    report = json.load(open(sys.argv[1]))
    rows = [r for r in report["results"] if not r.get("failed")]
    workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
    fig, axes = plt.subplots(len(workloads), 2, figsize=(13, 2.1 + 1.6 * len(workloads)), squeeze=False)
    for i, w in enumerate(workloads):
        rs = [r for r in rows if r["workload"] == w]
        if w == "pinned-fetch":  # W4's anchor is W3 (the same fetch, unpinned, no writes)
            rs += [dict(r, system="Ubiquity W3 (current generation)") for r in rows
                   if r["workload"] == "predicate-fetch" and r["system"] == "Ubiquity"]
        labels = [f"{r['system']}\n[{r['driver']}]" for r in rs]
        colors = ["#d62728" if r["system"] == "Ubiquity" else "#7f7f7f" for r in rs]
        for j, (key, unit) in enumerate((("throughput", "per second"), ("p99_ms", "p99 ms"))):
            ax = axes[i][j]
            values = [0 if r.get("na") else (r.get("rows_per_s") if key == "throughput" and w == "save100" and r.get("rows_per_s") else r.get(key) or 0)
                      for r in rs]
            y = range(len(rs))
            ax.barh(list(y), [max(v, 1e-9) for v in values], color=colors)
            ax.set_yticks(list(y))
            ax.set_yticklabels(labels, fontsize=7)
            ax.invert_yaxis()
            ax.set_xscale("log")
            # minor ticks unlabelled: on a short log axis their labels run into each other
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            positive = [v for v in values if v > 0]
            if positive:
                ax.set_xlim(min(positive) / 3, max(positive) * 3)
            for k, (r, v) in enumerate(zip(rs, values)):
                text = r["na"] if r.get("na") else (f"{v:,.0f}" if key == "throughput" else f"{v:.3f}")
                ax.text(min(positive) / 2.5 if (r.get("na") and positive) else v, k, " " + text, va="center", fontsize=7)
            unit_text = "rows per second" if (w == "save100" and key == "throughput") else unit
            ax.set_title(f"{TITLES[w]} — {unit_text}{' (higher is better)' if key == 'throughput' else ' (lower is better)'}",
                         fontsize=9)
    m = report["machine"]
    fig.suptitle(f"Ubiquity vs anchors — {report['started'][:10]}, {m['cpus']} cores ({m['cpu']}), "
                 f"{'quick' if report['quick'] else 'full'} run, median of {report['rounds']}; "
                 f"load generator on the same cores", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
