#!/usr/bin/env bash
# The README's test command. It runs every suite twice: once against real
# MariaDB and Redis (starting local ones when they are installed but down), and
# once more against the embedded backends (SQLite and the in-process Redis),
# because the product promises that both behave the same.
#
# Extra arguments go to both `go test` runs, e.g. ./scripts/test.sh -run Hold
#
# Environment:
#   SLOTWHEEL_TEST_MYSQL_DSN, SLOTWHEEL_TEST_REDIS_URL  servers to test against;
#       default to the local ones when those answer
#   SLOTWHEEL_TEST_REQUIRE_SERVERS=1  fail instead of quietly falling back to
#       the embedded backends when a server cannot be reached (CI sets it)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly DEFAULT_MYSQL_DSN='root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC&multiStatements=true'
readonly DEFAULT_REDIS_URL='redis://127.0.0.1:6379/0'
readonly WAIT_SECONDS=30

phase() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }

# Over TCP, as the tests connect, not through the socket. mysqladmin's ping
# succeeds even when access is denied: it asks only whether the server is up.
mysql_ping() {
	local admin
	for admin in mariadb-admin mysqladmin; do
		if command -v "$admin" >/dev/null 2>&1; then
			"$admin" --protocol=tcp --host=127.0.0.1 --port=3306 --user=root \
				--connect-timeout=2 ping >/dev/null 2>&1
			return
		fi
	done
	(exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null
}

redis_ping() {
	if command -v redis-cli >/dev/null 2>&1; then
		redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG
		return
	fi
	(exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null
}

# wait_for NAME CHECK: true once CHECK succeeds, false after WAIT_SECONDS.
wait_for() {
	local name=$1 check=$2 i
	for ((i = 0; i < WAIT_SECONDS; i++)); do
		if "$check"; then
			return 0
		fi
		sleep 1
	done
	note "$name did not answer within ${WAIT_SECONDS}s"
	return 1
}

start_mariadb() {
	if mysql_ping; then
		return 0
	fi
	if [[ ! -x /usr/sbin/mariadbd ]] || ! command -v start-stop-daemon >/dev/null 2>&1; then
		return 1
	fi
	note "starting MariaDB"
	# /run is often a fresh tmpfs in containers; mariadbd cannot create its
	# socket and pid file without this directory.
	if [[ ! -d /run/mysqld && $(id -u) -eq 0 ]]; then
		mkdir -p /run/mysqld
		chown mysql:mysql /run/mysqld 2>/dev/null || true
	fi
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
	wait_for MariaDB mysql_ping
}

start_redis() {
	if redis_ping; then
		return 0
	fi
	if ! command -v redis-server >/dev/null 2>&1; then
		return 1
	fi
	note "starting Redis"
	redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
	wait_for Redis redis_ping
}

phase "servers"
missing=()
if [[ -n ${SLOTWHEEL_TEST_MYSQL_DSN:-} ]]; then
	note "MySQL: SLOTWHEEL_TEST_MYSQL_DSN is set; using it"
elif start_mariadb; then
	export SLOTWHEEL_TEST_MYSQL_DSN=$DEFAULT_MYSQL_DSN
	note "MySQL: local MariaDB on 127.0.0.1:3306"
	# A freshly initialised server may lack the database the DSN names.
	for client in mariadb mysql; do
		if command -v "$client" >/dev/null 2>&1; then
			"$client" --protocol=tcp --host=127.0.0.1 --port=3306 --user=root \
				-e 'CREATE DATABASE IF NOT EXISTS test' >/dev/null 2>&1 ||
				note "could not create database 'test'; the tests will say why"
			break
		fi
	done
else
	missing+=("MySQL/MariaDB (127.0.0.1:3306; set SLOTWHEEL_TEST_MYSQL_DSN or install mariadb-server)")
	note "MySQL: unreachable"
fi
if [[ -n ${SLOTWHEEL_TEST_REDIS_URL:-} ]]; then
	note "Redis: SLOTWHEEL_TEST_REDIS_URL is set; using it"
elif start_redis; then
	export SLOTWHEEL_TEST_REDIS_URL=$DEFAULT_REDIS_URL
	note "Redis: local redis-server on 127.0.0.1:6379"
else
	missing+=("Redis (127.0.0.1:6379; set SLOTWHEEL_TEST_REDIS_URL or install redis-server)")
	note "Redis: unreachable"
fi
if [[ ${SLOTWHEEL_TEST_REQUIRE_SERVERS:-} == 1 && ${#missing[@]} -gt 0 ]]; then
	for m in "${missing[@]}"; do
		printf 'FAIL: SLOTWHEEL_TEST_REQUIRE_SERVERS=1 but %s cannot be reached\n' "$m" >&2
	done
	exit 1
fi
if [[ ${#missing[@]} -gt 0 ]]; then
	note "the unreachable backends are tested in their embedded form only"
fi

phase "go vet"
go vet ./...

phase "gofmt"
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	printf 'these files need gofmt -w:\n%s\n' "$unformatted" >&2
	exit 1
fi

# Names the backends without printing the DSN or URL, which may hold a password.
backend() { if [[ -n $1 ]]; then echo "$2"; else echo "$3"; fi; }
phase "go test -race against $(backend "${SLOTWHEEL_TEST_MYSQL_DSN:-}" MySQL SQLite)" \
	"and $(backend "${SLOTWHEEL_TEST_REDIS_URL:-}" Redis 'in-process Redis')"
# e2e/ runs fleets of the real binary and asserts release and expiry lags: it runs on its own after
# the other packages, so that their load does not count against its bounds.
mapfile -t packages < <(go list ./... | grep -v '/e2e$')
go test -race -count=1 -timeout 20m "$@" "${packages[@]}"
go test -race -count=1 -timeout 20m "$@" ./e2e/

phase "go test against the embedded backends (SQLite, in-process Redis)"
if [[ -z ${SLOTWHEEL_TEST_MYSQL_DSN:-} && -z ${SLOTWHEEL_TEST_REDIS_URL:-} ]]; then
	note "skipped: the run above already used only the embedded backends"
else
	# The embedded pass is meant to run without servers, so "servers required" does not apply.
	env -u SLOTWHEEL_TEST_MYSQL_DSN -u SLOTWHEEL_TEST_REDIS_URL -u SLOTWHEEL_TEST_REQUIRE_SERVERS \
		go test -count=1 -timeout 15m "$@" ./...
fi

phase "ok"
