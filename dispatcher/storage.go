package dispatcher

import (
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/storage"
)

// Storage is the storage mode d runs in, as Config.Buckets set it at start-up:
// Citus with buckets, SingleNode without.
func (d *Dispatcher) Storage() effectdtype.Storage { return d.store.Mode() }

// Store is the storage d runs on, for the operator service (operator.New).
func (d *Dispatcher) Store() storage.Store { return d.store }
