#!/usr/bin/env python3
"""Draws docs/tracing-trace.png from a trace as Jaeger's query API returns it
(GET /api/traces/{id}), as TestTraceToJaeger keeps it:

  EFFECTD_TRACE_JSON=/tmp/trace.json go test -run '^TestTraceToJaeger$' ./cmd/effectd/
  python3 docs/tracing-trace.py /tmp/trace.json > /tmp/trace.svg
  rsvg-convert -o docs/tracing-trace.png /tmp/trace.svg   # Debian: librsvg2-bin

A row per span, each under its parent, a bar on one time axis."""
import json
import sys
from html import escape

trace = json.load(open(sys.argv[1]))["data"][0]
spans = trace["spans"]
procs = trace["processes"]
by_id = {s["spanID"]: s for s in spans}


def parent(s):
    for r in s["references"]:
        if r["refType"] == "CHILD_OF" and r["spanID"] in by_id:
            return r["spanID"]
    return None


children = {}
for s in spans:
    children.setdefault(parent(s), []).append(s)
rows = []


def walk(pid, depth):
    for s in sorted(children.get(pid, []), key=lambda s: s["startTime"]):
        rows.append((s, depth))
        walk(s["spanID"], depth + 1)


walk(None, 0)
t0 = min(s["startTime"] for s in spans)
t1 = max(s["startTime"] + s["duration"] for s in spans)
KEEP = ("effectd.channel", "effectd.event_id", "effectd.intent_id", "effectd.attempt", "effectd.outcome",
        "effectd.idempotency_key", "effectd.provider_event.type", "effectd.delivery", "http.response.status_code")
W, LABEL, ROW = 1400, 470, 46
width = W - LABEL - 20
colors = {"checkout": "#4e79a7", "effectd": "#f28e2b"}
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{ROW * len(rows) + 70}" font-family="DejaVu Sans" font-size="13">',
       f'<rect width="100%" height="100%" fill="white"/>',
       f'<text x="10" y="22" font-size="15" font-weight="bold">trace {trace["traceID"]} — {len(spans)} spans, {(t1 - t0) / 1000:.0f} ms</text>']
for ms in range(0, int((t1 - t0) / 1000) + 1, 100):
    x = LABEL + width * ms * 1000 / (t1 - t0)
    out.append(f'<line x1="{x:.1f}" y1="34" x2="{x:.1f}" y2="{ROW * len(rows) + 50}" stroke="#ddd"/>')
    out.append(f'<text x="{x + 2:.1f}" y="46" fill="#888" font-size="11">{ms} ms</text>')
for i, (s, depth) in enumerate(rows):
    y = 56 + i * ROW
    svc = procs[s["processID"]]["serviceName"]
    tags = {t["key"]: t["value"] for t in s["tags"]}
    out.append(f'<text x="{10 + depth * 18}" y="{y + 14}" font-weight="bold">{escape(s["operationName"])}</text>')
    out.append(f'<text x="{10 + depth * 18}" y="{y + 30}" fill="#666" font-size="11">{escape(svc)}</text>')
    x = LABEL + width * (s["startTime"] - t0) / (t1 - t0)
    w = max(2, width * s["duration"] / (t1 - t0))
    out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" rx="3" fill="{colors.get(svc, "#59a14f")}"/>')
    attrs = "  ".join(f"{k.removeprefix('effectd.')}={tags[k]}" for k in KEEP if k in tags)
    out.append(f'<text x="{LABEL}" y="{y + 32}" fill="#333" font-size="11">{escape(attrs)} ({s["duration"] / 1000:.1f} ms)</text>')
out.append("</svg>")
print("\n".join(out))
