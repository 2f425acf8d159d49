// Package e2e tests slotwheel as it is deployed past one machine: several instances of the real
// binary (internal/testenv/fleet) on one MySQL database and a private Redis Cluster of three masters
// and three replicas (scripts/cluster.sh), or a private MariaDB where a test must own the server.
// The tests run only against real servers (SLOTWHEEL_TEST_MYSQL_DSN, redis-server installed); with
// SLOTWHEEL_TEST_REQUIRE_SERVERS=1 a missing one fails them instead of skipping. It holds tests only.
package e2e
