package sandbox

import (
	"net/url"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
	"github.com/effectd/effectd/providers/sandbox/twiliosandbox"
)

// The ledger and the faults every emulated provider shares.
type (
	Ledger   = emu.Ledger
	Call     = emu.Call
	Effect   = emu.Effect
	Callback = emu.Callback
	Snapshot = emu.Snapshot
	Fault    = emu.Fault
	Faults   = emu.Faults
)

// Magic test numbers of the Twilio emulator (see twiliosandbox).
const (
	TwilioInvalidNumber      = twiliosandbox.InvalidNumber      // To: 21211; From: 21212
	TwilioUnroutableNumber   = twiliosandbox.UnroutableNumber   // To: 21612
	TwilioNoPermissionNumber = twiliosandbox.NoPermissionNumber // To: 21408
	TwilioUnsubscribedNumber = twiliosandbox.UnsubscribedNumber // To: 21610
	TwilioNotMobileNumber    = twiliosandbox.NotMobileNumber    // To: 21614
	TwilioNotOwnedNumber     = twiliosandbox.NotOwnedNumber     // From: 21606
	TwilioUndeliveredNumber  = twiliosandbox.UndeliveredNumber  // accepted, then undelivered with error 30003
)

// TwilioSignature is Twilio's X-Twilio-Signature of a form POST to fullURL.
func TwilioSignature(authToken, fullURL string, form url.Values) string {
	return twiliosandbox.Signature(authToken, fullURL, form)
}

// TwilioMessages returns the messages the Twilio emulator accepted for to
// (every message when to is empty), oldest first.
func (s *Server) TwilioMessages(to string) []twiliosandbox.Message { return s.twilio.Messages(to) }

// SetTwilioQueueDelay sets how long a new message reads as queued (date_sent
// null) before it reads as sent; 0 makes messages sent at once.
func (s *Server) SetTwilioQueueDelay(d time.Duration) { s.twilio.SetQueueDelay(d) }

// SetTwilioDeliveryDelay sets how long a sent message reads as sent before it
// reads as delivered (or undelivered).
func (s *Server) SetTwilioDeliveryDelay(d time.Duration) { s.twilio.SetDeliveryDelay(d) }

// SetStripeWebhook registers the endpoint that receives Stripe events, as
// PUT /_sandbox/stripe/webhook does, in the events' default API version.
func (s *Server) SetStripeWebhook(url, secret string) { s.stripe.SetWebhook(url, secret) }

// SetStripeRefundFailDelay sets how long after its creation a refund of
// pi_refund_fails turns failed (default stripesandbox.RefundFailDelay).
func (s *Server) SetStripeRefundFailDelay(d time.Duration) { s.stripe.SetRefundFailDelay(d) }
