package effectdtype

// Storage is the storage mode effectd runs in: decided once at start-up
// (database.storage, or what the database is in when auto) and handed to
// whatever branches on it, which never asks the database.
type Storage int

// The storage modes.
const (
	SingleNode Storage = iota // one PostgreSQL
	Citus                     // distributed on a Citus cluster (migrations.Migrator.Distribute)
)

// String is the mode as database.storage spells it: single or citus.
func (s Storage) String() string {
	if s == Citus {
		return "citus"
	}
	return "single"
}
