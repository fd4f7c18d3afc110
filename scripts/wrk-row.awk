# One Markdown table row from `wrk --latency` output: name (-v name=...), requests/s,
# p50, p90, p99, and errors (non-2xx answers plus socket errors). Used by load.sh and
# compare-tantivy.sh.
/Requests\/sec/ { rps = $2 }
/^ +50%/ { p50 = $2 } /^ +90%/ { p90 = $2 } /^ +99%/ { p99 = $2 }
/Non-2xx/ { bad += $NF }
/Socket errors/ { gsub(/[^0-9 ]/, " "); split($0, n, " "); bad += n[1] + n[2] + n[3] + n[4] }
END { printf "| %s | %s | %s | %s | %s | %d |\n", name, rps, p50, p90, p99, bad }
