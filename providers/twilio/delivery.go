package twilio

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
