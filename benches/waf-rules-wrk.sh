#!/usr/bin/env bash
# Per-request cost of svc's shipped ModSecurity rules: wrk against a real Apache with
# mod_security2 on loopback, with and without rules/modsecurity/svc-rules.conf (the engine is
# on in both, so the difference is the rules alone), in the same run, alternating which goes
# first. Two request kinds: a public GET of a static file (every helper rule runs, no rule
# denies) and a denied request (rule 900112 denies in phase 1).
#
# Usage: benches/waf-rules-wrk.sh      Env: ROUNDS (default 3), DURATION (default 10s),
#        CONNECTIONS (default 16), THREADS (default 2).
# Prints p50 and p99 latency and requests/s of each configuration and the differences.
set -euo pipefail
cd "$(dirname "$0")/.."
rules="$(pwd)/rules/modsecurity/svc-rules.conf"
rounds="${ROUNDS:-3}" dur="${DURATION:-10s}" conns="${CONNECTIONS:-16}" threads="${THREADS:-2}"
for p in /usr/sbin/apache2 /usr/lib/apache2/modules/mod_security2.so /usr/bin/wrk; do
  [ -e "$p" ] || { echo "missing $p (apt-get install apache2 libapache2-mod-security2 wrk)" >&2; exit 1; }
done
work="$(mktemp -d /tmp/svc-waf-wrk.XXXXXX)"
pids=()
cleanup() {
  for c in "$work"/*/httpd.conf; do [ -e "$c" ] && /usr/sbin/apache2 -f "$c" -k stop 2>/dev/null || true; done
  sleep 0.5; rm -rf "$work"
}
trap cleanup EXIT

setup() { # $1 name, $2 port, $3 with rules (1/0)
  local d="$work/$1"; mkdir -p "$d/htdocs"; echo ok > "$d/htdocs/index.html"
  { echo "SecRuleEngine On"; echo "SecRequestBodyAccess On"; echo "SecAuditEngine Off"
    echo "SecDataDir $d"; echo "SecTmpDir $d"
    [ "$3" = 1 ] && echo "Include $rules"; true; } > "$d/modsec.conf"
  cat > "$d/httpd.conf" <<CONF
ServerRoot $d
Listen 127.0.0.1:$2
PidFile $d/httpd.pid
ErrorLog $d/error.log
LogLevel error
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule unique_id_module /usr/lib/apache2/modules/mod_unique_id.so
LoadModule security2_module /usr/lib/apache2/modules/mod_security2.so
ServerName localhost
DocumentRoot $d/htdocs
<Directory $d/htdocs>
  Require all granted
</Directory>
Include $d/modsec.conf
CONF
  /usr/sbin/apache2 -f "$d/httpd.conf" -k start
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$2/index.html" && break; sleep 0.1; done
}
setup without 18201 0
setup with 18202 1

run() { # $1 port, $2 path -> "p50 p99 rps"
  wrk -t"$threads" -c"$conns" -d"$dur" --latency "http://127.0.0.1:$1$2" 2>/dev/null | awk '
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    $1=="50%" {p50=ms($2)} $1=="99%" {p99=ms($2)} $1=="Requests/sec:" {rps=$2}
    END {printf "%.3f %.3f %.0f", p50, p99, rps}'
}

for kind in "/index.html?s=hello" "/wp-json/wp/v2/users"; do
  echo "== GET $kind"
  for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="without with"; else order="with without"; fi
    declare -A res=()
    for cfg in $order; do
      port=18201; [ "$cfg" = with ] && port=18202
      res[$cfg]="$(run $port "$kind")"
    done
    read -r a50 a99 arps <<<"${res[without]}"
    read -r b50 b99 brps <<<"${res[with]}"
    printf "round %d: without rules p50 %.3f ms p99 %.3f ms %s req/s | with rules p50 %.3f ms p99 %.3f ms %s req/s | diff p50 %+.3f ms p99 %+.3f ms\n" \
      "$r" "$a50" "$a99" "$arps" "$b50" "$b99" "$brps" "$(echo "$b50 - $a50" | bc -l)" "$(echo "$b99 - $a99" | bc -l)"
  done
done
