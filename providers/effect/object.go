package effect

import "github.com/effectd/effectd/effectdtype"

// Object is one effect a provider holds, as a listing for the reconciliation
// sweep reads it: effectdtype.ProviderObject, which a sweep's findings carry.
type Object = effectdtype.ProviderObject
