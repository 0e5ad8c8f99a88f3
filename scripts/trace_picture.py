#!/usr/bin/env python3
"""Draws a copy from an MTC_TRACE_FILE trace (Trace Event Format JSON) as an
SVG picture: one lane per thread and per device's copy stream, time to the
right, each span a bar coloured by its kind (planning, allocation, staging,
DMA issue, the DMA or kernel on the GPU, waits, takes), with a legend.

    python3 scripts/trace_picture.py TRACE.json -o PICTURE.svg [--copy K | --last-ms MS] [--title TEXT]

--copy K     the K-th copy of the file (0 first, -1 last: the default) and
             what ran on the GPU and waited for it
--last-ms MS the last MS milliseconds of the file (for loader workers
             feeding the main thread)

Python 3 standard library only. Perfetto (ui.perfetto.dev) and
chrome://tracing open the same file interactively.
"""
import argparse
import html
import json
import math
import os
import sys

COLOURS = {
    "copy": "#d9d9d9",
    "plan": "#9e9ac8",
    "alloc": "#fdae6b",
    "stage": "#74c476",
    "issue": "#6baed6",
    "launch": "#6baed6",
    "dma": "#2171b5",
    "kernel": "#08519c",
    "wait": "#fb6a4a",
    "take": "#fdd0a2",
}
LABELS = {
    "copy": "a copy (submit to enqueued)",
    "plan": "planning (submit to run)",
    "alloc": "allocation",
    "stage": "staging into pinned memory",
    "issue": "DMA or kernel issued",
    "dma": "DMA on the GPU",
    "kernel": "kernel on the GPU",
    "wait": "waits",
    "take": "a parcel taken",
}
LANE = 26  # px per lane
LEFT = 230  # px for the lane names
WIDTH = 1400


def load(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    notes = [e for e in events if e.get("ph") == "i"]
    return spans, notes, names


def window(spans, copy_index, last_ms):
    """The time range to draw, in the file's microseconds."""
    if last_ms is not None:
        end = max(e["ts"] + e["dur"] for e in spans)
        return end - last_ms * 1e3, end
    copies = [e for e in spans if e.get("cat") == "copy"]
    if not copies:
        sys.exit("trace_picture: the file holds no copy")
    try:
        copy = copies[copy_index]
    except IndexError:
        sys.exit(f"trace_picture: there are {len(copies)} copies; --copy {copy_index} is none of them")
    # From its planning on the submitting thread to the end of its run.
    start, end = copy["args"].get("submitted", copy["ts"]), copy["ts"] + copy["dur"]
    # What the copy's thread issued ran on the GPU and was waited for after it was enqueued.
    thread = copy["tid"]
    for e in spans:
        issued_by = e.get("args", {}).get("thread")
        if e["cat"] in ("dma", "kernel") and issued_by == thread and start <= e["args"].get("issued", 0) <= end:
            end = max(end, e["ts"] + e["dur"])
    for e in spans:
        if e["cat"] == "wait" and e["name"] == "wait for copy" and start <= e["ts"] + e["dur"] and e["ts"] <= end:
            end = max(end, e["ts"] + e["dur"])
    margin = (end - start) * 0.02
    return start - margin, end + margin


def lane_order(spans, names):
    """Threads first (the process's main thread, then by id), then streams."""
    tids = sorted({e["tid"] for e in spans})
    pid = spans[0]["pid"] if spans else 0
    streams = [t for t in tids if "stream" in names.get(t, "")]
    threads = [t for t in tids if t not in streams]
    threads.sort(key=lambda t: (t != pid, t))
    return threads + streams


def ticks(span_us):
    """A tick step of 1, 2 or 5 times a power of ten: at most twelve ticks."""
    step = 10 ** math.floor(math.log10(max(span_us, 1e-3) / 12))
    for f in (1, 2, 5, 10):
        if span_us / (step * f) <= 12:
            return step * f
    return step * 20


def draw(spans, notes, names, start, end, title):
    shown = [e for e in spans if e["ts"] + e["dur"] >= start and e["ts"] <= end]
    lanes = lane_order(shown, names)
    scale = (WIDTH - LEFT - 20) / (end - start)
    x = lambda t: LEFT + (min(max(t, start), end) - start) * scale  # noqa: E731
    top = 50
    height = top + LANE * len(lanes) * 2 + 90
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    step = ticks(end - start)
    for k in range(int((end - start) / step) + 1):
        t = k * step
        px = x(start + t)
        out.append(f'<line x1="{px:.1f}" y1="{top - 8}" x2="{px:.1f}" y2="{top + LANE * len(lanes) * 2}" stroke="#eee"/>')
        label = f"{t / 1e3:g} ms" if step >= 1000 else f"{t:g} µs"
        out.append(f'<text x="{px + 2:.1f}" y="{top - 10}" fill="#555">{label}</text>')
    for i, tid in enumerate(lanes):
        y = top + i * LANE * 2
        name = names.get(tid, f"thread {tid}")
        out.append(f'<text x="10" y="{y + LANE}" fill="#222">{html.escape(name)}</text>')
        out.append(f'<line x1="{LEFT}" y1="{y + LANE * 2 - 2}" x2="{WIDTH - 20}" y2="{y + LANE * 2 - 2}" stroke="#ccc"/>')
        for e in (e for e in shown if e["tid"] == tid):
            cat = e.get("cat", "")
            # The copy and its planning in a thin row above the steps they hold.
            row_y, row_h = (y + 2, 10) if cat in ("copy", "plan") else (y + 14, LANE * 2 - 20)
            x0, x1 = x(e["ts"]), x(e["ts"] + e["dur"])
            w = max(x1 - x0, 0.8)
            args = e.get("args", {})
            detail = ", ".join(f"{k} {v}" for k, v in args.items() if k in ("leaves", "bytes", "target"))
            tip = html.escape(f'{e["name"]}: {e["dur"]:.1f} µs' + (f" ({detail})" if detail else ""))
            out.append(
                f'<rect x="{x0:.2f}" y="{row_y}" width="{w:.2f}" height="{row_h}" fill="{COLOURS.get(cat, "#bbb")}" '
                f'stroke="white" stroke-width="0.3"><title>{tip}</title></rect>'
            )
            if w > 7 * len(e["name"]) and row_h > 10:
                out.append(f'<text x="{x0 + 3:.1f}" y="{row_y + row_h / 2 + 4}" fill="white">{html.escape(e["name"])}</text>')
    for n in notes:
        if start <= n["ts"] <= end and n["tid"] in lanes:
            px, y = x(n["ts"]), top + lanes.index(n["tid"]) * LANE * 2
            out.append(f'<path d="M{px:.1f},{y + 12} l-4,-8 h8 z" fill="#444"><title>{html.escape(n["name"])}</title></path>')
    y = top + LANE * len(lanes) * 2 + 25
    px = 10
    for cat, label in LABELS.items():
        out.append(f'<rect x="{px}" y="{y - 10}" width="12" height="12" fill="{COLOURS[cat]}"/>')
        out.append(f'<text x="{px + 16}" y="{y}">{html.escape(label)}</text>')
        px += 30 + 6 * len(label)
        if px > WIDTH - 200:
            px, y = 10, y + 20
    out.append(f'<text x="10" y="{height - 10}" fill="#555">▼ a note: which path a part of the copy took (hover for its text). '
               f"GPU spans end when a timing event after them completed; they begin no earlier than their issue.</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="an MTC_TRACE_FILE file")
    parser.add_argument("-o", "--output", required=True, help="the SVG file to write")
    parser.add_argument("--copy", type=int, default=-1, help="which copy (0 first, -1 last)")
    parser.add_argument("--last-ms", type=float, help="draw the last MS milliseconds instead of one copy")
    parser.add_argument("--title", help="the picture's title")
    a = parser.parse_args()
    spans, notes, names = load(a.trace)
    if not spans:
        sys.exit(f"trace_picture: {a.trace} holds no span")
    start, end = window(spans, a.copy, a.last_ms)
    copies = [e for e in spans if e.get("cat") == "copy" and start <= e["ts"] <= end]
    if a.title:
        title = a.title
    elif a.last_ms is not None:
        title = f"{len(copies)} copies in the last {a.last_ms:g} ms of {a.trace}"
    else:
        c = copies[0]["args"] if copies else {}
        title = f'a copy to {c.get("target", "?")}: {c.get("leaves", "?")} leaves, {c.get("bytes", "?")} bytes ({a.trace})'
    os.makedirs(os.path.dirname(a.output) or ".", exist_ok=True)
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(draw(spans, notes, names, start, end, title))
    print(f"trace_picture: {a.output}: {title}")


if __name__ == "__main__":
    main()
