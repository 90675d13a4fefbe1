// Package pgtest gives each test its own PostgreSQL database with effectd's schema
// applied, cloned from a migrated template. It uses TEST_DATABASE_URL when set and
// otherwise starts one throwaway cluster per test binary (see localpg).
package pgtest
