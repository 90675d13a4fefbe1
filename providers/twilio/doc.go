// Package twilio sends SMS through Twilio's Messages API (twilio-go), and finds
// out whether an in-doubt send took effect by listing messages.
//
// Twilio has no idempotency key for messages, so a send that may have reached
// Twilio is never repeated blindly: its error says MaybeSent and the
// reconciler settles it with Lookup, which lists recent messages to the same
// number from the same sender and matches the body.
//
// Of effectd's packages it imports only the shared providers/effect (meta
// names, error classes, Retry-After) and providers/fieldrule; it satisfies
// dispatcher.Provider and dispatcher.Looker by method signature.
package twilio
