// Package localpg starts a throwaway PostgreSQL cluster from the binaries on this
// machine: initdb into a directory, a Unix socket and a loopback port. Tests, the
// benchmark and `make run` use it when no DATABASE_URL is given. Running as root,
// it runs the server as the postgres user, since PostgreSQL refuses root.
package localpg
