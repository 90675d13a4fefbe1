// Package localpg starts a throwaway PostgreSQL cluster from the binaries on this
// machine: initdb into a directory, a Unix socket and a loopback port. Tests, the
// benchmark and `make run` use it when no DATABASE_URL is given. A running
// cluster can be copied into a streaming standby (pg_basebackup -R), optionally
// synchronous, which can be promoted once its primary is killed: the failover
// of `effectd chaos --faults failover`. Running as root, it runs the server as
// the postgres user, since PostgreSQL refuses root. StartCitus starts a Citus
// cluster the same way: a coordinator and workers on loopback, each its own
// directory, with databases made on every node (Citus.CreateDatabase), and a
// worker that can be stopped and started again.
package localpg
