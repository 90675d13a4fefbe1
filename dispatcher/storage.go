package dispatcher

import "github.com/effectd/effectd/effectdtype"

// Storage is the storage mode d runs in, as Config.Buckets set it at start-up:
// Citus with buckets, SingleNode without.
func (d *Dispatcher) Storage() effectdtype.Storage { return d.store.Mode() }
