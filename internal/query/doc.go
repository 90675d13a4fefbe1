// Package query holds the SQL that effectd runs on its own tables, one
// statement per embedded .sql file, exposed as strings. It sits at the module
// root so that the dispatcher, the admin API and the commands share one home
// for their SQL.
package query
