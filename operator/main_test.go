package operator_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// storeOf is the store of mode on pool, as the dispatcher hands it to the
// service (dispatcher.Dispatcher.Store).
func storeOf(pool *pgxpool.Pool, mode effectdtype.Storage) storage.Store {
	return storage.New(mode, pool, storage.Leases{})
}
