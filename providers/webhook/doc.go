// Package webhook sends signed webhooks: an HTTP POST of the intent's JSON
// payload, signed per Standard Webhooks (webhook-id, webhook-timestamp,
// webhook-signature v1) and carrying the idempotency key as webhook-id and
// Idempotency-Key, so a receiver that deduplicates by webhook-id applies each
// intent once however often it is delivered.
//
// Errors are *Error values classified by behaviour (Retryable, MaybeSent,
// RetryAfter): a 2xx answer is success; 408, 425, 429 and 5xx are retryable;
// other answers, redirects included, are permanent; a call that failed after
// the request was written is retryable and may have been sent. A Retry-After
// is read with effect.ParseRetryAfter. Of effectd's packages it imports only
// the shared providers/effect.
package webhook
