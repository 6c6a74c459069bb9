#!/usr/bin/env bash
# Validates erpsync's deployment artifacts offline: no Docker engine, no
# Kubernetes cluster, no Prometheus server. Exits 0 only when every check ran
# and passed; a check whose tool is missing counts as failed, with the
# package to install.
#
# Tools (Debian 12):
#   apt-get install -y --no-install-recommends prometheus docker-compose python3-yaml
#   (promtool; compose v1, unless the `docker compose` v2 plugin is there;
#   PyYAML), and Go with the Go module proxy for deploy/tools/k8scheck.
#
#   bash deploy/check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=()

check() { # check NAME CMD...: runs CMD, records the outcome
	local name=$1
	shift
	echo "== $name"
	if "$@"; then
		passed=$((passed + 1))
	else
		echo "   FAILED: $name"
		failed+=("$name")
	fi
}

missing() { # missing NAME HOW: a check that cannot run
	echo "== $1"
	echo "   MISSING TOOL: $2"
	failed+=("$1 (tool missing)")
}

# --- tools -----------------------------------------------------------------
py=""
for cand in python3 /usr/bin/python3; do
	if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import yaml' >/dev/null 2>&1; then
		py=$cand
		break
	fi
done
have_promtool=false
command -v promtool >/dev/null 2>&1 && have_promtool=true
compose=()
if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
fi
have_go=false
command -v go >/dev/null 2>&1 && have_go=true

# --- artifacts' structure, settings, metric names --------------------------
if [ -n "$py" ]; then
	check "artifacts (Dockerfile, .dockerignore, compose, alerts, dashboard, settings)" \
		"$py" deploy/tools/check_artifacts.py \
		--emit-dashboard-rules "$tmp/dashboard-queries.yml" \
		--emit-k8s-prometheus "$tmp/prom-k8s" \
		--emit-context "$tmp/context"
else
	missing "artifacts (check_artifacts.py)" "python3 with PyYAML: apt-get install -y python3-yaml"
fi

# --- Prometheus -------------------------------------------------------------
promtool_k8s() {
	local out
	if out=$(promtool check config deploy/prometheus/prometheus-kubernetes.yml 2>&1); then
		echo "$out"
		return 0
	fi
	if ! grep -q 'field kubernetes_sd_configs not found' <<<"$out"; then
		echo "$out"
		return 1
	fi
	# Debian's promtool is built without Kubernetes discovery: check the
	# rest of the file with that block swapped for static_configs.
	echo "   note: this promtool lacks kubernetes_sd_configs; checking the rest of the file"
	[ -f "$tmp/prom-k8s/prometheus-kubernetes.yml" ] || {
		echo "   the converted file is missing (check_artifacts.py did not run)"
		return 1
	}
	promtool check config "$tmp/prom-k8s/prometheus-kubernetes.yml"
}

if $have_promtool; then
	check "promtool check rules alerts.yml" promtool check rules deploy/prometheus/alerts.yml
	check "promtool test rules alerts_test.yml" promtool test rules deploy/prometheus/alerts_test.yml
	check "promtool check config prometheus.yml" promtool check config deploy/prometheus/prometheus.yml
	check "promtool check config prometheus-kubernetes.yml" promtool_k8s
	if [ -f "$tmp/dashboard-queries.yml" ]; then
		check "promtool: every Grafana query parses" promtool check rules "$tmp/dashboard-queries.yml"
	else
		echo "== promtool: every Grafana query parses"
		echo "   FAILED: no queries extracted (check_artifacts.py did not run)"
		failed+=("dashboard queries")
	fi
else
	missing "promtool (rules, rule tests, configs, dashboard queries)" \
		"promtool: apt-get install -y --no-install-recommends prometheus"
fi

# --- docker compose ---------------------------------------------------------
if [ ${#compose[@]} -gt 0 ]; then
	check "${compose[*]} config -q" "${compose[@]}" -f docker-compose.yml config -q
else
	missing "docker compose config" \
		"docker compose v2 plugin or docker-compose: apt-get install -y --no-install-recommends docker-compose"
fi

# --- the image's build, without a Docker engine -------------------------------
# The builder stage's go build, run on exactly the files .dockerignore keeps
# (a .dockerignore that drops a file the build needs fails here).
context_build() {
	[ -d "$tmp/context" ] || {
		echo "   the build context is missing (check_artifacts.py did not run)"
		return 1
	}
	(cd "$tmp/context" && export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOWORK=off &&
		go build -trimpath -tags nodemo -ldflags "-s -w" -o "$tmp/bin/erpsync" ./cmd/erpsync &&
		go build -trimpath -ldflags "-s -w" -o "$tmp/bin/erpmock" ./cmd/erpmock) || return 1
	local b
	for b in erpsync erpmock; do
		go version -m "$tmp/bin/$b" | grep -q 'CGO_ENABLED=0' || {
			echo "   $b is not a CGO_ENABLED=0 (static) build"
			return 1
		}
	done
	echo "   built erpsync and erpmock (static) from the docker build context"
}
if $have_go; then
	check "docker build context: the Dockerfile's go build" context_build
else
	missing "docker build context (go build)" "go (/usr/local/go/bin)"
fi

# --- Kubernetes ---------------------------------------------------------------
k8scheck() {
	(cd deploy/tools/k8scheck && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 \
		go build -buildvcs=false -o "$tmp/k8scheck" .) && "$tmp/k8scheck" deploy/kubernetes
}
if $have_go; then
	check "k8scheck: strict API decoding and rules of deploy/kubernetes" k8scheck
else
	missing "k8scheck (deploy/kubernetes)" "go (/usr/local/go/bin) with the Go module proxy"
fi

# --- summary ----------------------------------------------------------------
echo
if [ ${#failed[@]} -gt 0 ]; then
	printf 'failed: %s\n' "${failed[@]}"
fi
echo "deploy: $passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
