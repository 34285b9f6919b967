# Sourced by the fleet benches (bench/fleet.sh, bench/federation_fleet.sh):
#
#   metric HOST:PORT NAME [LABEL=V1|V2...]...
#
# prints the sum of the /metrics samples NAME of the monitor at HOST:PORT
# whose labels match each LABEL=V1|V2... given, or -1 where none does (or the
# monitor does not answer within $metric_timeout_s seconds, 10 unless the
# script set it). Read with Prometheus's own parser in a Python process:
# waiting must cost the processes measured next to nothing, and a `fedprof`
# command is a LibTorch start (0.5 s of CPU).
metric() {
  /usr/bin/python3 - "${metric_timeout_s:-10}" "$@" <<'PY'
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
timeout, address, name = float(sys.argv[1]), sys.argv[2], sys.argv[3]
want = {k: v.split("|") for k, v in (a.split("=", 1) for a in sys.argv[4:])}
try:
    text = urllib.request.urlopen("http://%s/metrics" % address, timeout=timeout).read().decode()
except Exception:
    print(-1); sys.exit()
found = [s.value for family in text_string_to_metric_families(text) for s in family.samples
         if s.name == name and all(s.labels.get(k) in v for k, v in want.items())]
print(int(sum(found)) if found else -1)
PY
}
