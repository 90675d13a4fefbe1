// Package twiliosandbox is the sandbox's emulator of Twilio's Messages API:
// create, list and fetch under /2010-04-01/Accounts/{AccountSid}/, answering in
// Twilio's JSON shapes so that twilio-go decodes them.
//
// Authentication is HTTP Basic: the user must be the path's account SID and the
// password any non-empty token; anything else is 401 (code 20003).
//
// There is no idempotency: every accepted POST creates a new message (SID "SM"
// followed by 32 hex digits) and applies a "twilio" effect keyed by that SID.
//
// A message reads as "queued" with a null date_sent until the queue delay has
// passed since its creation (default 1s, see SetQueueDelay), then as
// "sent" with date_sent = date_created + delay, and once the delivery delay
// has passed too (default 250ms, SetDeliveryDelay) as "delivered" — or
// "undelivered" with error_code 30003 for To +15558675310. The state is
// computed when read. A message created with a StatusCallback has each status
// (queued, sent, then delivered or undelivered) POSTed to that URL as it is
// reached, in real time, once each, as Twilio does: form-encoded MessageSid,
// MessageStatus, ErrorCode, … and signed in X-Twilio-Signature with the auth
// token that created the message. The ledger lists each in its callbacks.
//
// Validation follows Twilio, including its magic test numbers:
//
//	To missing                 400 21604
//	To not E.164               400 21211
//	To   +15005550001          400 21211 (invalid number)
//	To   +15005550002          400 21612 (cannot route to this number)
//	To   +15005550003          400 21408 (no permission for the region)
//	To   +15005550004          400 21610 (recipient unsubscribed: replied STOP)
//	To   +15005550009          400 21614 (not a mobile number)
//	From and MessagingServiceSid missing  400 21603
//	From +15005550001          400 21212 (invalid From)
//	From +15005550007          400 21606 (From not owned by the account)
//	Body missing               400 21602
//	Body over 1600 characters  400 21617
//
// Faults of kind "twilio" apply to every route, after authentication; an
// injected error answers in Twilio's error shape with code 20429 for 429 and
// 20000+status otherwise, and a drop runs the route, then closes the
// connection without its answer.
package twiliosandbox
