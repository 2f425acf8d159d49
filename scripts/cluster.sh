#!/usr/bin/env bash
# A private Redis Cluster of 3 masters and 3 replicas on 127.0.0.1, for the
# tests that need one (internal/testenv/redistest starts it on free ports) and
# for trying the product against a cluster by hand. Each node is a daemonized
# redis-server without persistence. The shared Redis on 6379 is never touched:
# stop shuts down only nodes whose pid file lies in the cluster's directory.
#
# usage: scripts/cluster.sh start|stop|status [--base-port P] [--dir D] [--wait S]
#   --base-port P  nodes listen on P..P+5 (default 7101); Redis Cluster also
#                  uses P+10000..P+10005 for its bus
#   --dir D        the nodes' files (default ${TMPDIR:-/tmp}/slotwheel-redis-cluster-P);
#                  stop removes it
#   --wait S       how long start waits for the cluster to be healthy (default 60)
#
# start ends by printing the seed URL for go-redis's ParseClusterURL:
#   redis://127.0.0.1:P?addr=127.0.0.1:P+1&addr=127.0.0.1:P+2
# Both start and stop are idempotent: start on a healthy cluster says so and
# succeeds, stop with nothing running succeeds.
set -euo pipefail

readonly NODES=6 SLOTS=16384

die() {
	printf 'cluster.sh: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '/^# usage:/,/^# Both/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

command=${1:-}
if [[ $# -gt 0 ]]; then
	shift
fi
base=7101 dir="" wait_seconds=60
while [[ $# -gt 0 ]]; do
	case $1 in
	--base-port) base=${2:?--base-port needs a value}; shift 2 ;;
	--base-port=*) base=${1#*=}; shift ;;
	--dir) dir=${2:?--dir needs a value}; shift 2 ;;
	--dir=*) dir=${1#*=}; shift ;;
	--wait) wait_seconds=${2:?--wait needs a value}; shift 2 ;;
	--wait=*) wait_seconds=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
done
readonly max_base=$((65535 - 10000 - NODES + 1))
if [[ ! $base =~ ^[0-9]+$ ]] || ((base < 1024 || base > max_base)); then
	die "--base-port must be a number from 1024 to $max_base"
fi
[[ $wait_seconds =~ ^[0-9]+$ ]] || die "--wait must be a number of seconds"
dir=${dir:-${TMPDIR:-/tmp}/slotwheel-redis-cluster-$base}
# redis-server changes into its --dir before it opens the log and pid files:
# relative paths would land in the wrong place.
[[ $dir == /* ]] || dir=$PWD/$dir
readonly base dir wait_seconds
ports=()
for ((i = 0; i < NODES; i++)); do
	ports+=($((base + i)))
done
readonly ports last=$((base + NODES - 1))

cli() {
	local port=$1
	shift
	timeout 5 redis-cli -h 127.0.0.1 -p "$port" "$@"
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

seed_url() {
	printf 'redis://127.0.0.1:%d?addr=127.0.0.1:%d&addr=127.0.0.1:%d\n' "$base" $((base + 1)) $((base + 2))
}

# node_healthy PORT: the node sees the cluster ok with every slot served,
# every node known with its final role (a replica joins as a master and the
# news of its demotion spreads by gossip), and, if it is a replica, its link to
# its master is up (a manual failover needs a replica in sync).
node_healthy() {
	local info nodes repl
	info=$(cli "$1" cluster info 2>/dev/null) || return 1
	[[ $info == *cluster_state:ok* && $info == *cluster_slots_ok:$SLOTS* &&
		$info == *cluster_known_nodes:${NODES}[^0-9]* ]] || return 1
	nodes=$(cli "$1" cluster nodes 2>/dev/null) || return 1
	awk -v want=$((NODES / 2)) '{
		n = split($3, flags, ",")
		for (i = 1; i <= n; i++) {
			if (flags[i] == "master") masters++
			if (flags[i] == "slave") replicas++
		}
	} END { exit !(masters == want && replicas == want) }' <<<"$nodes" || return 1
	repl=$(cli "$1" info replication 2>/dev/null) || return 1
	[[ $repl != *role:slave* || $repl == *master_link_status:up* ]]
}

cluster_healthy() {
	local p
	for p in "${ports[@]}"; do
		node_healthy "$p" || return 1
	done
}

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() {
	local state
	state=$(ps -p "$1" -o stat= 2>/dev/null) || return 1
	[[ $state != Z* ]]
}

# ours PID PORT: PID is the redis-server of PORT (redis-server sets its
# process title to "redis-server 127.0.0.1:PORT [cluster]"), not another
# process that got the number since.
ours() {
	local args
	args=$(ps -p "$1" -o args= 2>/dev/null) || return 1
	[[ $args =~ redis-server.*:$2([^0-9]|$) ]]
}

# wait_gone PID SECONDS: true once PID has exited.
wait_gone() {
	local deadline=$((SECONDS + $2))
	while alive "$1"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

start() {
	local p deadline
	command -v redis-server >/dev/null 2>&1 || die "redis-server is not installed"
	command -v redis-cli >/dev/null 2>&1 || die "redis-cli is not installed"
	if cluster_healthy; then
		echo "cluster already running on 127.0.0.1:$base-$last"
		seed_url
		return 0
	fi
	for p in "${ports[@]}"; do
		if listening "$p" || listening $((p + 10000)); then
			die "port $p or its bus port $((p + 10000)) is in use, but not by a healthy cluster;" \
				"run '$0 stop --base-port $base --dir $dir' if it is a broken one, or pick another --base-port"
		fi
	done

	mkdir -p "$dir"
	for p in "${ports[@]}"; do
		# A nodes file left by an earlier run would rejoin that cluster.
		rm -rf "${dir:?}/$p"
		mkdir -p "$dir/$p"
		# repl-diskless-sync-delay 0: the replicas sync at once instead of after 5 s.
		redis-server --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
			--cluster-node-timeout 2000 --appendonly no --save "" --repl-diskless-sync-delay 0 \
			--daemonize yes --port "$p" --bind 127.0.0.1 --dir "$dir/$p" \
			--logfile "$dir/$p.log" --pidfile "$dir/$p.pid" ||
			die "redis-server on port $p did not start; see $dir/$p.log"
	done

	# A daemonized redis-server forks before it binds its port: a failure to
	# bind shows only in its log, so wait for each node to answer.
	deadline=$((SECONDS + wait_seconds))
	for p in "${ports[@]}"; do
		until [[ $(cli "$p" ping 2>/dev/null) == PONG ]]; do
			if ((SECONDS >= deadline)); then
				tail -n 20 "$dir/$p.log" >&2 || true
				die "the node on port $p did not answer within ${wait_seconds}s"
			fi
			sleep 0.1
		done
	done

	local addrs=()
	for p in "${ports[@]}"; do
		addrs+=("127.0.0.1:$p")
	done
	if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1; then
		tail -n 30 "$dir/create.log" >&2 || true
		die "redis-cli --cluster create failed; log in $dir/create.log"
	fi

	until cluster_healthy; do
		if ((SECONDS >= deadline)); then
			for p in "${ports[@]}"; do
				printf '%s: %s\n' "$p" "$(cli "$p" cluster info 2>/dev/null | tr -d '\r' |
					grep -E '^cluster_(state|slots_ok|known_nodes)' | tr '\n' ' ')" >&2
			done
			die "the cluster was not healthy within ${wait_seconds}s (state ok, $SLOTS slots, replicas in sync)"
		fi
		sleep 0.1
	done
	echo "cluster ready on 127.0.0.1:$base-$last (files in $dir)"
	seed_url
}

stop() {
	local p pid pidfile found stopped=0
	for p in "${ports[@]}"; do
		pidfile=$dir/$p.pid
		pid="" found=0
		if [[ -f $pidfile ]]; then
			pid=$(<"$pidfile")
		fi
		# Only a node that says its pid file is ours: never another Redis on the port.
		if [[ $(cli "$p" config get pidfile 2>/dev/null | tail -n 1) == "$pidfile" ]]; then
			cli "$p" shutdown nosave >/dev/null 2>&1 || true
			found=1
		fi
		if [[ -n $pid ]] && ours "$pid" "$p"; then
			found=1
			if ! wait_gone "$pid" 5; then
				kill -KILL "$pid" 2>/dev/null || true
				wait_gone "$pid" 5 || die "redis-server $pid (port $p) is still alive after SIGKILL"
			fi
		fi
		rm -rf "${dir:?}/$p" "$dir/$p.log" "$pidfile"
		stopped=$((stopped + found))
	done
	rm -f "$dir/create.log"
	# Only what start created is removed; a directory that holds anything else stays.
	if [[ -d $dir ]] && ! rmdir "$dir" 2>/dev/null; then
		echo "left $dir in place: it holds files that are not the cluster's"
	fi
	if ((stopped == 0)); then
		echo "no cluster node of $dir was running on 127.0.0.1:$base-$last"
	else
		echo "cluster on 127.0.0.1:$base-$last stopped ($stopped nodes)"
	fi
}

status() {
	local p nodes
	for p in "${ports[@]}"; do
		if nodes=$(cli "$p" cluster nodes 2>/dev/null); then
			printf '%s\n' "$nodes"
			cli "$p" cluster info | tr -d '\r' | grep -E '^cluster_(state|slots_ok|known_nodes):'
			seed_url
			return 0
		fi
	done
	echo "no cluster node answers on 127.0.0.1:$base-$last"
	return 1
}

case $command in
start) start ;;
stop) stop ;;
status) status ;;
-h | --help | help) usage ;;
*)
	usage >&2
	exit 2
	;;
esac
