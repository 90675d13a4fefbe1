// Package citustest gives the Citus tests (build tag citus, `make test-citus`)
// a Citus cluster on loopback: one coordinator and two workers per test
// binary (localpg.StartCitus), started on first use and stopped by Main, and
// a fresh database per test, made on every node with the citus extension and
// the workers registered. A test can stop and start a worker of the shared
// cluster (Cluster(t).RestartWorker); such a test must not run in parallel.
//
// Without Citus installed the tests skip, saying how to install it
// (.ci/citus-install); with CI set they fail instead, so that CI cannot pass
// without having run them.
package citustest
