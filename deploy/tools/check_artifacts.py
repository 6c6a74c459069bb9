#!/usr/bin/env python3
"""Offline checks of erpsync's deployment artifacts (run by deploy/check.sh).

    python3 deploy/tools/check_artifacts.py [--emit-dashboard-rules FILE]
                                            [--emit-k8s-prometheus DIR]
                                            [--emit-context DIR]

Checks what the tools cannot: the Dockerfile and .dockerignore against the
source tree, the compose file's services and settings, the alert rules'
labels, annotations, runbook links and metric names, the Grafana dashboard's
structure and layout, and every ERPSYNC_* setting name used anywhere.

--emit-dashboard-rules writes the dashboard's queries as recording rules so
that `promtool check rules` parses each of them. --emit-k8s-prometheus writes
prometheus-kubernetes.yml with kubernetes_sd_configs swapped for
static_configs (and alerts.yml beside it), for a promtool built without
Kubernetes discovery (Debian's). --emit-context copies the files that
.dockerignore keeps, i.e. the docker build context, so that the Dockerfile's
go build can be tried on exactly those files.

Needs PyYAML. Exits 1 on any problem.
"""

import json
import os
import re
import shutil
import sys

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.stderr.write("check_artifacts: PyYAML is missing (apt-get install python3-yaml)\n")
    sys.exit(2)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")

# Settings of docs/configuration.md and of the subcommands (flag --x-y is
# ERPSYNC_X_Y). A name outside this list is most likely a typo.
KNOWN_SETTINGS = {
    "ERPSYNC_MYSQL_DSN", "ERPSYNC_POSTGRES_DSN", "ERPSYNC_REDIS_ADDR", "ERPSYNC_REDIS_USERNAME",
    "ERPSYNC_REDIS_PASSWORD", "ERPSYNC_REDIS_DB", "ERPSYNC_REDIS_TLS",
    "ERPSYNC_ERP_URL", "ERPSYNC_ERP_TOKEN", "ERPSYNC_ERP_TIMEOUT",
    "ERPSYNC_ERP_RETRIES", "ERPSYNC_JOB", "ERPSYNC_WORKERS", "ERPSYNC_LOCK_TTL",
    "ERPSYNC_PAGE_SIZE", "ERPSYNC_CHUNK_SIZE", "ERPSYNC_OVERLAP",
    "ERPSYNC_MAX_ATTEMPTS", "ERPSYNC_GRACE", "ERPSYNC_LOG_FORMAT",
    "ERPSYNC_LOG_LEVEL", "ERPSYNC_REPORT", "ERPSYNC_HTTP_ADDR", "ERPSYNC_EVERY",
    "ERPSYNC_SHARDS", "ERPSYNC_SHARD", "ERPSYNC_SINCE", "ERPSYNC_UNTIL",
    "ERPSYNC_CRON", "ERPSYNC_TICKS", "ERPSYNC_LOCK_PREFIX",
    # reconcile, and schedule's reconciles
    "ERPSYNC_MAX_DELETE", "ERPSYNC_DRY_RUN", "ERPSYNC_FORCE", "ERPSYNC_RECONCILE_EVERY",
    # relay, and schedule's relay
    "ERPSYNC_EVENTS_SINK", "ERPSYNC_EVENTS_URL", "ERPSYNC_EVENTS_SECRET_FILE",
    "ERPSYNC_EVENTS_SUBJECT", "ERPSYNC_EVENTS_EXCHANGE", "ERPSYNC_EVENTS_RETENTION",
    "ERPSYNC_BATCH_SIZE", "ERPSYNC_POLL", "ERPSYNC_MAX_BACKOFF",
}

# Metric names exported by the Go side, and the label values the rules and
# the dashboard may match on.
COUNTERS = {
    "erpsync_runs_total", "erpsync_records_total", "erpsync_lock_events_total",
    "erpsync_erp_requests_total", "erpsync_erp_retries_total",
    "erpsync_reconcile_refused_total", "erpsync_relay_skipped_total",
}
GAUGES = {
    "erpsync_last_success_timestamp_seconds", "erpsync_checkpoint_lag_seconds",
    "erpsync_quarantined_records", "erpsync_quarantined_rows", "erpsync_schedule_interval_seconds",
    "erpsync_events_pending", "erpsync_events_oldest_pending_seconds",
}
HISTOGRAMS = {
    "erpsync_lock_acquire_seconds", "erpsync_erp_request_duration_seconds",
    "erpsync_run_duration_seconds",
}
METRICS = COUNTERS | GAUGES | {h + s for h in HISTOGRAMS for s in ("_bucket", "_sum", "_count")}
LABEL_VALUES = {
    "status": {"succeeded", "skipped", "failed", "interrupted"},
    "outcome": {"inserted", "updated", "unchanged", "duplicate", "invalid", "failed",
                "stale_rejected", "unique_violation", "restored", "deleted", "repaired", "quarantined"},
    "kind": {"job", "record"},
    "event": {"obtained", "contended", "not_obtained", "lost", "renew_failed"},
    "mode": {"run", "backfill", "reconcile"},
}
REQUIRED_ALERTS = [
    "ErpsyncNoSuccessIn3Intervals", "ErpsyncSkipStreak", "ErpsyncQuarantineGrowing",
    "ErpsyncLockLost", "ErpsyncRunsFailing", "ErpsyncCheckpointLagHigh",
    "ErpsyncReconcileRefused", "ErpsyncRowsQuarantined", "ErpsyncEventsStuck",
]
REQUIRED_PANELS = [
    "Runs by status", "Records by outcome", "Skips vs successes", "Last success age",
    "Checkpoint lag", "Lock events", "Lock acquire latency", "ERP requests by code",
    "ERP retries", "ERP latency p95", "Run duration p95", "Quarantine size",
]

errors = []
warnings = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


def warn(where, msg):
    warnings.append(f"{where}: {msg}")


def rel(path):
    return os.path.relpath(path, ROOT)


def load_yaml(path, multi=False):
    with open(path) as f:
        return list(yaml.safe_load_all(f)) if multi else yaml.safe_load(f)


def go_flag_settings():
    """ERPSYNC_* names of the flags the Go source defines today (a hint only:
    the code is still growing, so a missing one is a warning)."""
    names = set()
    for d in ("internal/cli", "cmd/erpsync"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for fn in files:
                if fn.endswith(".go") and not fn.endswith("_test.go"):
                    with open(os.path.join(dirpath, fn), errors="replace") as f:
                        src = f.read()
                    # fs.XVar(&p, "name", ...) and the cli's helpers
                    # durationVar(fs, &p, "name", ...), intVar, nameVar...
                    for m in re.finditer(r'(?:fs\.\w+Var\(|\b\w+Var\(\s*fs\s*,)[^,]+,\s*"([a-z0-9-]+)"', src):
                        names.add("ERPSYNC_" + m.group(1).upper().replace("-", "_"))
                    # secretVar(fs, &s.X, "name", ...) defines --name and --name-file.
                    for m in re.finditer(r'\bsecretVar\(\s*fs\s*,[^,]+,\s*"([a-z0-9-]+)"', src):
                        names.add("ERPSYNC_" + m.group(1).upper().replace("-", "_") + "_FILE")
                    for m in re.finditer(r'fs\.(?:String|Int|Int64|Bool|Duration|Float64|Uint)\(\s*"([a-z0-9-]+)"', src):
                        names.add("ERPSYNC_" + m.group(1).upper().replace("-", "_"))
                    for m in re.finditer(r'"(ERPSYNC_[A-Z0-9_]+)"', src):
                        names.add(m.group(1))
    return names


GO_SETTINGS = go_flag_settings()


def check_setting(where, name):
    if not name.startswith("ERPSYNC_"):
        return
    if name not in KNOWN_SETTINGS:
        err(where, f"unknown setting {name} (typo? known: see docs/configuration.md)")
    elif GO_SETTINGS and name not in GO_SETTINGS:
        warn(where, f"{name} is not (yet) read by the Go source")


# --------------------------------------------------------------------------
# Dockerfile and .dockerignore

def dockerignore_patterns():
    pats = []
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            p = line[1:] if neg else line
            p = p.strip("/")
            rx = ""
            i = 0
            while i < len(p):
                if p.startswith("**/", i):
                    rx += "(?:.*/)?"
                    i += 3
                elif p.startswith("**", i):
                    rx += ".*"
                    i += 2
                elif p[i] == "*":
                    rx += "[^/]*"
                    i += 1
                elif p[i] == "?":
                    rx += "[^/]"
                    i += 1
                else:
                    rx += re.escape(p[i])
                    i += 1
            pats.append((neg, re.compile("^" + rx + "$")))
    return pats


def docker_excluded(path, pats):
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for neg, rx in pats:
        if any(rx.match(p) for p in prefixes):
            excluded = not neg
    return excluded


def check_docker():
    where = "Dockerfile"
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read()
    # Join continuation lines, drop comments.
    logical, cur = [], ""
    for line in text.splitlines():
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        cur += " " + s.rstrip("\\").strip() if cur else s.rstrip("\\").strip()
        if not s.endswith("\\"):
            logical.append(cur)
            cur = ""
    if cur:
        err(where, "ends inside a line continuation")
    known = {"FROM", "ARG", "ENV", "RUN", "COPY", "ADD", "WORKDIR", "USER", "EXPOSE",
             "ENTRYPOINT", "CMD", "LABEL", "HEALTHCHECK", "STOPSIGNAL", "VOLUME", "SHELL", "ONBUILD"}
    args, froms, stages = {}, [], []
    entrypoint = cmd = user = None
    exposes = []
    runs = []
    for ins in logical:
        kw, _, rest = ins.partition(" ")
        kw = kw.upper()
        if kw not in known:
            err(where, f"unknown instruction {kw!r}")
            continue
        if kw == "ARG" and not froms:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        elif kw == "FROM":
            toks = [t for t in rest.split() if not t.startswith("--platform")]
            img = toks[0]
            img = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), img)
            froms.append(img)
            if len(toks) >= 3 and toks[1].upper() == "AS":
                stages.append(toks[2])
        elif kw == "ENTRYPOINT":
            entrypoint = rest
        elif kw == "CMD":
            cmd = rest
        elif kw == "USER":
            user = rest.strip()
        elif kw == "EXPOSE":
            exposes += rest.split()
        elif kw == "RUN":
            runs.append(rest)
        elif kw == "COPY":
            m = re.search(r"--from=(\S+)", rest)
            if m and m.group(1) not in stages:
                err(where, f"COPY --from={m.group(1)}: no such stage")
    if len(froms) < 2:
        err(where, "want a multi-stage build")
    else:
        if not re.fullmatch(r"golang:1\.26(\.\d+)?-bookworm(@sha256:[0-9a-f]+)?", froms[0]):
            err(where, f"builder image {froms[0]!r}: want golang:1.26-bookworm")
        if not froms[-1].startswith("gcr.io/distroless/static-debian12:nonroot"):
            err(where, f"final image {froms[-1]!r}: want gcr.io/distroless/static-debian12:nonroot")
    try:
        if json.loads(entrypoint or "null") != ["/erpsync"]:
            err(where, f"ENTRYPOINT {entrypoint!r}: want [\"/erpsync\"]")
    except ValueError:
        err(where, f"ENTRYPOINT {entrypoint!r} is not exec (JSON) form")
    if cmd is not None:
        try:
            json.loads(cmd)
        except ValueError:
            err(where, f"CMD {cmd!r} is not exec (JSON) form")
    if user not in ("65532", "65532:65532", "nonroot", "nonroot:nonroot"):
        err(where, f"USER {user!r}: want 65532")
    if "9090" not in [e.split("/")[0] for e in exposes]:
        err(where, "EXPOSE 9090 missing")
    runs_text = "\n".join(runs)
    if not re.search(r"--mount=type=cache,target=/go/pkg/mod\s+go mod download", runs_text):
        err(where, "go mod download with a cache mount on /go/pkg/mod missing")
    for pkg in ("./cmd/erpsync", "./cmd/erpmock"):
        m = re.search(r"go build ([^;&]*)" + re.escape(pkg), runs_text)
        if not m:
            err(where, f"no go build of {pkg}")
            continue
        if "-trimpath" not in m.group(1) or '-ldflags "-s -w"' not in m.group(1):
            err(where, f"go build of {pkg} lacks -trimpath or -ldflags \"-s -w\"")
        d = os.path.join(ROOT, pkg)
        if not os.path.isdir(d) or not any(
                fn.endswith(".go") and "package main" in open(os.path.join(d, fn), errors="replace").read()
                for fn in os.listdir(d)):
            err(where, f"{pkg} is not a main package in the tree")
    if "CGO_ENABLED=0" not in runs_text:
        err(where, "CGO_ENABLED=0 missing")
    # The builder's Go must satisfy go.mod's go line (GOTOOLCHAIN=local).
    with open(os.path.join(ROOT, "go.mod")) as f:
        m = re.search(r"^go (\d+)\.(\d+)", f.read(), re.M)
    img = re.match(r"golang:(\d+)\.(\d+)", froms[0] if froms else "")
    if m and img and (int(img.group(1)), int(img.group(2))) < (int(m.group(1)), int(m.group(2))):
        err(where, f"builder Go {img.group(1)}.{img.group(2)} is older than go.mod's go {m.group(1)}.{m.group(2)}")

    # .dockerignore must keep everything the build reads.
    pats = dockerignore_patterns()
    needed = ["go.mod", "go.sum"]
    for dirpath, dirnames, files in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in (".git", "bin")]
        for fn in files:
            p = os.path.relpath(os.path.join(dirpath, fn), ROOT)
            if p.startswith("deploy/"):
                continue
            if (fn.endswith(".go") and not fn.endswith("_test.go")) or fn.endswith(".sql"):
                needed.append(p)
    for p in needed:
        if docker_excluded(p, pats):
            err(".dockerignore", f"excludes {p}, which the build needs")
    for p in (".git/HEAD", "bin/erpsync", "deploy/README.md", "internal/x/y_test.go"):
        if not docker_excluded(p, pats):
            warn(".dockerignore", f"does not exclude {p}")


# --------------------------------------------------------------------------
# docker-compose.yml

def env_dict(env):
    if isinstance(env, list):
        return dict(e.split("=", 1) if "=" in e else (e, None) for e in env)
    return dict(env or {})


def duration_s(s):
    total, n = 0.0, 0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", str(s)):
        total += float(num) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
        n += 1
    return total if n else None


def check_compose():
    where = "docker-compose.yml"
    c = load_yaml(os.path.join(ROOT, "docker-compose.yml"))
    svcs = c.get("services", {})
    for name in ("mysql", "redis", "erpmock", "migrate", "sync-a", "sync-b"):
        if name not in svcs:
            err(where, f"service {name} missing")
    if any(n not in svcs for n in ("mysql", "redis", "erpmock", "migrate", "sync-a", "sync-b")):
        return
    # The MariaDB the tests run against (mariadb --version on the CI machine).
    if svcs["mysql"].get("image") != "mariadb:10.11" or "healthcheck" not in svcs["mysql"]:
        err(where, "mysql: want image mariadb:10.11 (the version the tests use) with a healthcheck")
    if svcs["redis"].get("image") != "redis:7-alpine" or "healthcheck" not in svcs["redis"]:
        err(where, "redis: want image redis:7-alpine with a healthcheck")
    app = [n for n in ("erpmock", "migrate", "sync-a", "sync-b")]
    images = {svcs[n].get("image") for n in app}
    if len(images) != 1 or None in images:
        err(where, f"erpmock, migrate and the replicas must share one image, got {images}")
    if sum(1 for n in app if "build" in svcs[n]) != 1:
        err(where, "exactly one of the erpsync services should build the image")
    em = svcs["erpmock"]
    if em.get("entrypoint") not in (["/erpmock"], "/erpmock"):
        err(where, "erpmock: entrypoint must be /erpmock")
    eenv = env_dict(em.get("environment"))
    if str(eenv.get("ERPMOCK_RECORDS")) != "20000":
        err(where, "erpmock: ERPMOCK_RECORDS must be 20000")
    if not str(eenv.get("ERPMOCK_CHANGE_RATE", "0")).isdigit() or int(eenv.get("ERPMOCK_CHANGE_RATE", 0)) <= 0:
        err(where, "erpmock: ERPMOCK_CHANGE_RATE must be a small positive number")
    mg = svcs["migrate"]
    if mg.get("command") not in (["migrate"], "migrate"):
        err(where, "migrate: command must be migrate")
    if (mg.get("depends_on") or {}).get("mysql", {}).get("condition") != "service_healthy":
        err(where, "migrate: must depend on mysql service_healthy")
    ports = {}
    for n in ("sync-a", "sync-b"):
        s = svcs[n]
        if s.get("command") not in (["schedule"], "schedule"):
            err(where, f"{n}: command must be just schedule (settings go in environment)")
        env = env_dict(s.get("environment"))
        if env.get("ERPSYNC_EVERY") != "30s" or env.get("ERPSYNC_HTTP_ADDR") != ":9090":
            err(where, f"{n}: want ERPSYNC_EVERY=30s and ERPSYNC_HTTP_ADDR=:9090")
        for k in ("ERPSYNC_MYSQL_DSN", "ERPSYNC_REDIS_ADDR", "ERPSYNC_ERP_URL"):
            if not env.get(k):
                err(where, f"{n}: {k} not set")
        dep = s.get("depends_on") or {}
        want = {"migrate": "service_completed_successfully", "redis": "service_healthy",
                "erpmock": "service_started"}
        for k, v in want.items():
            if (dep.get(k) or {}).get("condition") != v:
                err(where, f"{n}: must depend on {k} {v}")
        for p in s.get("ports", []):
            host, _, cont = str(p).rpartition(":")
            ports[n] = (host, cont)
        grace = duration_s(env.get("ERPSYNC_GRACE", "25s"))
        stop = duration_s(s.get("stop_grace_period", "10s"))
        if grace is not None and stop is not None and stop <= grace:
            err(where, f"{n}: stop_grace_period {s.get('stop_grace_period', '10s')} must exceed ERPSYNC_GRACE")
    if ports.get("sync-a") != ("9091", "9090") or ports.get("sync-b") != ("9092", "9090"):
        err(where, f"replica ports: want 9091:9090 and 9092:9090, got {ports}")
    for n, s in svcs.items():
        for k in env_dict(s.get("environment")):
            check_setting(f"{where} {n}", k)


# --------------------------------------------------------------------------
# Kubernetes: setting names (the schema is k8scheck's job)

def check_k8s_settings():
    kdir = os.path.join(DEPLOY, "kubernetes")
    for fn in sorted(os.listdir(kdir)):
        if not fn.endswith((".yaml", ".yml")):
            continue
        for d in load_yaml(os.path.join(kdir, fn), multi=True):
            if not isinstance(d, dict):
                continue
            where = f"kubernetes/{fn} {d.get('kind')}/{d.get('metadata', {}).get('name')}"
            for k in list((d.get("data") or {})) + list((d.get("stringData") or {})):
                check_setting(where, k)
            stack = [d]
            while stack:
                x = stack.pop()
                if isinstance(x, dict):
                    if "containers" in x:
                        for ct in x["containers"]:
                            for e in ct.get("env", []):
                                check_setting(where, e["name"])
                            for a in ct.get("args", []):
                                m = re.match(r"--([a-z0-9-]+)", str(a))
                                if m:
                                    check_setting(where, "ERPSYNC_" + m.group(1).upper().replace("-", "_"))
                    stack.extend(x.values())
                elif isinstance(x, list):
                    stack.extend(x)


# --------------------------------------------------------------------------
# PromQL references (rules and dashboard)

def check_promql(where, expr):
    for m in re.finditer(r"\berpsync_[a-z0-9_]+", expr):
        if m.group(0) not in METRICS:
            err(where, f"unknown metric {m.group(0)}")
    for m in re.finditer(r'\b(status|outcome|kind|event|mode)\s*(=~|=|!=|!~)\s*"([^"]*)"', expr):
        label, _, value = m.groups()
        for v in value.split("|"):
            if v and not any(ch in v for ch in ".*+?[]()$") and v not in LABEL_VALUES[label]:
                err(where, f'{label}="{v}" is not one of {sorted(LABEL_VALUES[label])}')
    for m in re.finditer(r"histogram_quantile\(\s*[\d.]+\s*,(.*)", expr):
        if "_bucket" not in m.group(1) or "le" not in m.group(1):
            err(where, "histogram_quantile needs a _bucket rate summed by le")
    for m in re.finditer(r"\b(rate|increase|irate)\(\s*(erpsync_[a-z0-9_]+)", expr):
        if m.group(2) in GAUGES:
            err(where, f"{m.group(1)}() of gauge {m.group(2)}")


RUNBOOKS = "docs/operations.md"


def runbook_anchors():
    path = os.path.join(ROOT, RUNBOOKS)
    if not os.path.exists(path):
        return set()
    anchors = set()
    with open(path) as f:
        for line in f:
            m = re.match(r"#+\s+(.*)", line)
            if m:
                a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
                anchors.add(a)
    return anchors


def check_alerts():
    where = "prometheus/alerts.yml"
    doc = load_yaml(os.path.join(DEPLOY, "prometheus", "alerts.yml"))
    anchors = runbook_anchors()
    seen = {}
    for g in doc.get("groups", []):
        for r in g.get("rules", []):
            name = r.get("alert")
            if not name:
                continue
            w = f"{where} {name}"
            if name in seen:
                err(w, "defined twice")
            seen[name] = r
            if "for" not in r:
                err(w, "no for")
            sev = (r.get("labels") or {}).get("severity")
            if sev not in ("critical", "warning", "info"):
                err(w, f"severity {sev!r}: want critical, warning or info")
            ann = r.get("annotations") or {}
            for k in ("summary", "description"):
                if not ann.get(k):
                    err(w, f"annotation {k} missing")
            if not (ann.get("runbook_url") or ann.get("runbook")):
                err(w, "no runbook hint (runbook_url or runbook)")
            url = ann.get("runbook_url", "")
            if url and f"{RUNBOOKS}#" not in url:
                err(w, f"runbook_url {url}: want a heading of {RUNBOOKS}")
            elif url and url.split("#", 1)[1] not in anchors:
                err(w, f"runbook_url anchor #{url.split('#', 1)[1]} is no heading of {RUNBOOKS}")
            check_promql(w, r.get("expr", ""))
    for name in REQUIRED_ALERTS:
        if name not in seen:
            err(where, f"alert {name} missing")
    return seen


# --------------------------------------------------------------------------
# Grafana dashboard

def check_dashboard(emit_rules=None):
    where = "grafana/erpsync-dashboard.json"
    with open(os.path.join(DEPLOY, "grafana", "erpsync-dashboard.json")) as f:
        try:
            d = json.load(f)
        except ValueError as e:
            err(where, f"invalid JSON: {e}")
            return
    if d.get("schemaVersion") != 39:
        err(where, f"schemaVersion {d.get('schemaVersion')}: want 39")
    if not d.get("uid") or not d.get("title"):
        err(where, "uid and title are required")
    tv = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = tv.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        err(where, "template variable datasource (type datasource, query prometheus) missing")
    job = tv.get("job")
    q = job and (job.get("query") if isinstance(job.get("query"), str) else (job.get("query") or {}).get("query"))
    if not job or job.get("type") != "query" or (q or "").replace(" ", "") != "label_values(erpsync_runs_total,job)":
        err(where, "template variable job = label_values(erpsync_runs_total, job) missing")
    elif (job.get("datasource") or {}).get("uid") != "${datasource}":
        err(where, "variable job must use ${datasource}")
    ids, rects, titles, exprs = set(), [], set(), []
    panels = list(d.get("panels", []))
    for p in list(panels):
        panels.extend(p.get("panels", []))
    for p in panels:
        pid, title = p.get("id"), p.get("title", "")
        w = f"{where} panel {pid} {title!r}"
        if not isinstance(pid, int):
            err(w, "id must be an integer")
        elif pid in ids:
            err(w, "duplicate id")
        ids.add(pid)
        titles.add(title)
        gp = p.get("gridPos")
        if not isinstance(gp, dict) or not all(isinstance(gp.get(k), int) for k in ("h", "w", "x", "y")):
            err(w, "gridPos with integer h, w, x, y missing")
        else:
            if gp["x"] < 0 or gp["w"] <= 0 or gp["x"] + gp["w"] > 24 or gp["h"] <= 0 or gp["y"] < 0:
                err(w, f"gridPos {gp} outside the 24-column grid")
            for ow, o in rects:
                if (gp["x"] < o["x"] + o["w"] and o["x"] < gp["x"] + gp["w"]
                        and gp["y"] < o["y"] + o["h"] and o["y"] < gp["y"] + gp["h"]):
                    err(w, f"gridPos overlaps {ow}")
            rects.append((f"panel {pid}", gp))
        if p.get("type") == "row":
            continue
        if (p.get("datasource") or {}).get("uid") != "${datasource}":
            err(w, "datasource must be ${datasource}")
        targets = p.get("targets") or []
        if not targets:
            err(w, "no targets")
        refs = set()
        for t in targets:
            if t.get("refId") in refs:
                err(w, f"duplicate refId {t.get('refId')}")
            refs.add(t.get("refId"))
            e = t.get("expr", "")
            if not e:
                err(w, "target without expr")
                continue
            check_promql(w, e)
            exprs.append((pid, t.get("refId"), e))
    for t in REQUIRED_PANELS:
        if t not in titles:
            err(where, f"panel {t!r} missing")
    lat = [e for pid, _, e in exprs if "erpsync_lock_acquire_seconds_bucket" in e]
    for qv in ("0.5", "0.95", "0.99"):
        if not any(f"histogram_quantile({qv}," in e for e in lat):
            err(where, f"lock acquire latency p{qv} (histogram_quantile) missing")
    if emit_rules:
        rules = []
        for pid, ref, e in exprs:
            e2 = (e.replace("$__rate_interval", "1m").replace("$__interval", "1m")
                   .replace("$__range", "1h").replace("${job}", ".*").replace("$job", ".*"))
            rules.append({"record": f"dashboard:panel_{pid}_{ref}", "expr": e2})
        with open(emit_rules, "w") as f:
            yaml.safe_dump({"groups": [{"name": "dashboard-queries", "rules": rules}]}, f, sort_keys=False)


# --------------------------------------------------------------------------
# Prometheus configs

def check_prometheus(emit_dir=None):
    for fn in ("prometheus.yml", "prometheus-kubernetes.yml"):
        where = f"prometheus/{fn}"
        c = load_yaml(os.path.join(DEPLOY, "prometheus", fn))
        if "alerts.yml" not in (c.get("rule_files") or []):
            err(where, "rule_files must include alerts.yml")
        jobs = c.get("scrape_configs") or []
        if not jobs:
            err(where, "no scrape_configs")
        for j in jobs:
            if j.get("honor_labels") is not True:
                err(f"{where} {j.get('job_name')}", "honor_labels: true is required (erpsync's own job label)")
            if not j.get("job_name", "").startswith("erpsync"):
                err(f"{where} {j.get('job_name')}", "job_name must start with erpsync (ErpsyncTargetDown)")
        if fn == "prometheus-kubernetes.yml":
            if not any("kubernetes_sd_configs" in j for j in jobs):
                err(where, "no kubernetes_sd_configs")
            if emit_dir:
                for j in jobs:
                    if "kubernetes_sd_configs" in j:
                        del j["kubernetes_sd_configs"]
                        j["static_configs"] = [{"targets": ["placeholder:9090"]}]
                os.makedirs(emit_dir, exist_ok=True)
                with open(os.path.join(emit_dir, fn), "w") as f:
                    yaml.safe_dump(c, f, sort_keys=False)
                shutil.copy(os.path.join(DEPLOY, "prometheus", "alerts.yml"), emit_dir)


def emit_context(dest):
    pats = dockerignore_patterns()
    for dirpath, dirnames, files in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames
                       if not docker_excluded(os.path.relpath(os.path.join(dirpath, d), ROOT), pats)]
        for fn in files:
            p = os.path.relpath(os.path.join(dirpath, fn), ROOT)
            if docker_excluded(p, pats):
                continue
            os.makedirs(os.path.join(dest, os.path.dirname(p)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, p), os.path.join(dest, p))


def main(argv):
    emit_rules = emit_k8s = emit_ctx = None
    i = 0
    while i < len(argv):
        if argv[i] == "--emit-dashboard-rules":
            emit_rules = argv[i + 1]
            i += 2
        elif argv[i] == "--emit-k8s-prometheus":
            emit_k8s = argv[i + 1]
            i += 2
        elif argv[i] == "--emit-context":
            emit_ctx = argv[i + 1]
            i += 2
        else:
            sys.stderr.write(__doc__)
            return 2
    check_docker()
    check_compose()
    check_k8s_settings()
    alerts = check_alerts()
    check_dashboard(emit_rules)
    check_prometheus(emit_k8s)
    if emit_ctx:
        emit_context(emit_ctx)
    for w in warnings:
        print("  warning:", w)
    for e in errors:
        print("  ERROR", e)
    if errors:
        print(f"check_artifacts: {len(errors)} problem(s)")
        return 1
    print(f"check_artifacts: Dockerfile, .dockerignore, docker-compose.yml, {len(alerts)} alerts, "
          f"dashboard, Prometheus configs and ERPSYNC_* names OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
