package dispatcher_test

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/storage"
)

// storeOf is the store of mode on pool, as the operator service holds it
// (operator.New).
func storeOf(pool *pgxpool.Pool, mode effectdtype.Storage) storage.Store {
	return storage.New(mode, pool, storage.Leases{})
}
