// Package effect is the vocabulary the dispatcher and the providers share
// about one call that makes an effect: the meta names stamped on it, how a
// failed call's error is classified (retryable, permanent, maybe sent, rate
// limited with a Retry-After), and how a Retry-After header is read.
//
// A provider's error states its class through the optional methods
// Retryable() bool, MaybeSent() bool and RetryAfter() time.Duration; Classify
// reads them with errors.As, as the dispatcher and the contract suite
// (providers/providertest) both do. Object, what a provider's listing holds,
// is effectdtype's ProviderObject. It imports no effectd package but
// effectdtype, the leaf of shared types, so every provider may use it without
// importing the dispatcher.
package effect
