#!/usr/bin/env bash
# Grows a real Nsight Systems export into a large one for the ingest benchmark:
# copies it and replicates its runtime, kernel, memcpy, memset, sync and NVTX rows
# COPIES times, shifted in time and with fresh correlation ids.
# Usage: bench/make_nsys.sh REAL.sqlite OUT.sqlite COPIES
set -euo pipefail
real=$1 out=$2 copies=$3
cp "$real" "$out"
chmod u+w "$out"
span=$(sqlite3 "$out" "select max(end) - min(start) + 1000 from CUPTI_ACTIVITY_KIND_RUNTIME")
corr=$(sqlite3 "$out" "select max(correlationId) + 1 from CUPTI_ACTIVITY_KIND_RUNTIME")
sqlite3 "$out" >/dev/null <<SQL
PRAGMA journal_mode=OFF;
PRAGMA synchronous=OFF;
CREATE TEMP TABLE copies(k INTEGER);
WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < $copies - 1)
INSERT INTO copies SELECT k FROM n;
CREATE TEMP TABLE rt AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME;
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME
  SELECT start + k * $span, end + k * $span, eventClass, globalTid, correlationId + k * $corr,
         nameId, returnValue, callchainId FROM rt, copies;
CREATE TEMP TABLE nv AS SELECT * FROM NVTX_EVENTS;
INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, category, color, text, globalTid,
                         endGlobalTid, textId, domainId)
  SELECT start + k * $span, end + k * $span, eventType, rangeId, category, color, text,
         globalTid, endGlobalTid, textId, domainId FROM nv, copies;
SQL
# Kernels: replicate with every column, shifting times and correlation ids.
cols=$(sqlite3 "$out" "select group_concat(name, ',') from pragma_table_info('CUPTI_ACTIVITY_KIND_KERNEL')")
sel=$(echo "$cols" | sed -e "s/\bstart\b/start + k * $span/" -e "s/\bend\b/end + k * $span/" \
      -e "s/\bcorrelationId\b/correlationId + k * $corr/")
sqlite3 "$out" "CREATE TEMP TABLE copies(k INTEGER);
WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < $copies - 1)
INSERT INTO copies SELECT k FROM n;
CREATE TEMP TABLE kn AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL;
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ($cols) SELECT $sel FROM kn, copies;"
sqlite3 "$out" "select 'rows', (select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME) + (select count(*) from CUPTI_ACTIVITY_KIND_KERNEL) + (select count(*) from NVTX_EVENTS)" >&2
