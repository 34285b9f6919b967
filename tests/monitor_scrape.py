#!/usr/bin/python3
"""Scrapes a FedProf monitor's /metrics and parses it with the Prometheus
client library's own parser (python3-prometheus-client). Prints one JSON
object: each sample as "name{label="value",...}" (labels sorted) -> value,
and each family's type under "# TYPE name". Exits 1 with one line on stderr
when the page cannot be fetched or is not valid exposition text."""
import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: monitor_scrape.py URL [TOKEN_FILE]")
    request = urllib.request.Request(sys.argv[1].rstrip("/") + "/metrics")
    if len(sys.argv) == 3:
        with open(sys.argv[2]) as f:
            request.add_header("Authorization", "Bearer " + f.read().strip())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            content_type = response.headers.get("Content-Type", "")
            text = response.read().decode("utf-8")
    except Exception as e:  # one line, whatever went wrong
        sys.exit("monitor_scrape: cannot fetch /metrics: %s" % e)
    if not content_type.startswith("text/plain"):
        sys.exit("monitor_scrape: Content-Type %r is not the text format" % content_type)
    out = {}
    try:
        for family in text_string_to_metric_families(text):
            out["# TYPE " + family.name] = family.type
            for sample in family.samples:
                labels = ",".join('%s="%s"' % kv for kv in sorted(sample.labels.items()))
                out["%s{%s}" % (sample.name, labels)] = sample.value
    except Exception as e:
        sys.exit("monitor_scrape: not Prometheus text: %s" % e)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
