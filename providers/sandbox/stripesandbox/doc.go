// Package stripesandbox is the sandbox's emulator of the parts of Stripe's API
// that effectd uses: creating, retrieving, listing and searching refunds,
// payment intents and transfers under /v1/, with Stripe's idempotency keys,
// and webhook events sent to an endpoint registered at
// /_sandbox/stripe/webhook, signed as Stripe signs them.
package stripesandbox
