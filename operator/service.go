package operator

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/storage"
)

// Service is what operators act through: each of its methods is one
// transaction (or one read) on the pool, in the storage mode store was
// chosen for at start-up.
type Service struct {
	pool  *pgxpool.Pool
	store storage.Operator
}

// New returns the service over pool, running the statements whose form
// depends on the storage mode through store (the one decided at start-up:
// dispatcher.Dispatcher.Store); a nil store is one PostgreSQL's.
func New(pool *pgxpool.Pool, store storage.Operator) *Service {
	if store == nil {
		store = storage.New(effectdtype.SingleNode, pool, storage.Leases{})
	}
	return &Service{pool: pool, store: store}
}
