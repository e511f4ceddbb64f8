#!/usr/bin/python3
"""Prints the fault suite's figures (one JSON object per line, written by the cases through
GWB_FAULTS_REPORT) as one Markdown table: what each fault left behind once it was cleared."""
import json
import sys


def p99(row):
    v = row.get("submit_p99_ms")
    return "?" if v is None else f"{v:.1f} ms"


def main(path):
    try:
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        print(f"faults-table: {path}: no figures (no fault case ran)", file=sys.stderr)
        return 1
    print("| fault | requests | acknowledged | present | tasks | drift | Jobs | tasks with two Jobs "
          "| Jobs without task | all ended, after the fault | after the start | submissions' p99 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {r['requests']} | {r['acknowledged']} | {r['present']} "
              f"| {r['tasks']} | {r['drift']} | {r['jobs']} | {r['tasks_with_two_jobs']} "
              f"| {r['jobs_without_task']} | {r['recover_s']:.1f} s | {r['total_s']:.1f} s "
              f"| {p99(r)} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: faults-table.py REPORT.jsonl", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
