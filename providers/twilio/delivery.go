package twilio

import (
	"context"
	"strconv"

	openapi "github.com/twilio/twilio-go/rest/api/v2010"
)

// Deliveries a message status maps to, as effectd stores them.
const (
	DeliveryAccepted    = "accepted"
	DeliveryDelivered   = "delivered"
	DeliveryUndelivered = "undelivered"
)

// Delivery maps a Twilio message status to a delivery: accepted while Twilio
// or the carrier still holds it, delivered or undelivered once final, and ""
// for statuses that say nothing about an outbound message (inbound ones,
// unknown ones).
func Delivery(status string) string {
	switch status {
	case "accepted", "scheduled", "queued", "sending", "sent", "partially_delivered":
		return DeliveryAccepted
	case "delivered", "read":
		return DeliveryDelivered
	case "undelivered", "failed", "canceled":
		return DeliveryUndelivered
	}
	return ""
}

// Poll fetches message sid and tells what became of it: its status, the
// delivery it maps to, and the detail ("undelivered 30003").
func (p *Provider) Poll(ctx context.Context, sid string) (status, delivery, detail string, reversal bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	api, tr := p.api(ctx)
	msg, err := api.FetchMessage(sid, &openapi.FetchMessageParams{})
	if err != nil {
		return "", "", "", false, classify("poll", "", err, tr)
	}
	status = deref(msg.Status)
	detail = status
	if msg.ErrorCode != nil && *msg.ErrorCode != 0 {
		detail += " " + strconv.Itoa(*msg.ErrorCode)
	}
	return status, Delivery(status), detail, false, nil
}
