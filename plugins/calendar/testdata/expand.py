"""Expands the VEVENTs of one iCalendar file over [FROM, TO) with python's
dateutil, independently of the plugin's Go code: the tests compare the
two. Prints one JSON list of [start, end, summary], UTC, sorted.

    python3 expand.py FILE.ics 2026-10-12T00:00:00Z 2026-11-09T00:00:00Z

It reads what the test files use: DTSTART/DTEND with TZID or in UTC,
RRULE, EXDATE, and overrides (RECURRENCE-ID) that replace an instance."""
import json
import sys
from datetime import datetime, timezone

from dateutil import rrule, tz


def unfold(text):
    lines = []
    for raw in text.replace("\r\n", "\n").split("\n"):
        if raw.startswith((" ", "\t")) and lines:
            lines[-1] += raw[1:]
        elif raw:
            lines.append(raw)
    return lines


def parse_time(name_params, value):
    params = dict(p.split("=", 1) for p in name_params.split(";")[1:])
    if value.endswith("Z"):
        return datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    zone = tz.gettz(params["TZID"]) if "TZID" in params else None
    return datetime.strptime(value, "%Y%m%dT%H%M%S").replace(tzinfo=zone)


def events(lines):
    out, cur, depth = [], None, []
    for line in lines:
        if line.startswith("BEGIN:"):
            depth.append(line[6:])
            if line == "BEGIN:VEVENT":
                cur = {"EXDATE": []}
            continue
        if line.startswith("END:"):
            if line == "END:VEVENT":
                out.append(cur)
                cur = None
            depth.pop()
            continue
        if cur is None or depth[-1] != "VEVENT":
            continue
        head, value = line.split(":", 1)
        name = head.split(";")[0]
        if name in ("DTSTART", "DTEND", "RECURRENCE-ID"):
            cur[name] = parse_time(head, value)
        elif name == "EXDATE":
            cur["EXDATE"] += [parse_time(head, v) for v in value.split(",")]
        else:
            cur[name] = value
    return out


def main():
    path, lo, hi = sys.argv[1:4]
    lo = datetime.fromisoformat(lo.replace("Z", "+00:00"))
    hi = datetime.fromisoformat(hi.replace("Z", "+00:00"))
    evs = events(unfold(open(path, encoding="utf-8").read()))
    master = [e for e in evs if "RECURRENCE-ID" not in e][0]
    overrides = [e for e in evs if "RECURRENCE-ID" in e]
    replaced = {o["RECURRENCE-ID"] for o in overrides}
    length = master["DTEND"] - master["DTSTART"]
    rules = rrule.rruleset()
    rules.rrule(rrule.rrulestr(master["RRULE"], dtstart=master["DTSTART"]))
    for x in master["EXDATE"]:
        rules.exdate(x)
    found = []
    for start in rules:
        if start >= hi:
            break
        end = start + length
        if start in replaced or not (start < hi and end > lo):
            continue
        found.append((start, end, master["SUMMARY"]))
    for o in overrides:
        if o["DTSTART"] < hi and o["DTEND"] > lo:
            found.append((o["DTSTART"], o["DTEND"], o["SUMMARY"]))
    utc = lambda t: t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(json.dumps(sorted([utc(s), utc(e), summ] for s, e, summ in found)))


main()
