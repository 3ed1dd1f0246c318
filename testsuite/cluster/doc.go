// Package cluster holds the tests of sessionflow on the production topology,
// run on a local cluster (internal/app/cluster): PostgreSQL, the Temporal server
// with several history shards and SQL visibility, and separate worker
// processes sharing one store root. They cover the lifecycle paths, the
// failover of a live session from a worker killed with SIGKILL to another,
// and a Temporal server and a PostgreSQL restarted while sessions append.
//
// The tests need the server binaries (built from tools/ on first use,
// several minutes on two cores) and PostgreSQL (installed with apt-get when
// missing), so they run only when asked:
//
//	SESSIONFLOW_CLUSTER=1 go test ./testsuite/cluster/ -v
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package cluster
