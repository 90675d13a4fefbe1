package twilio

import "testing"

func TestDelivery(t *testing.T) {
	want := map[string]string{
		"accepted": DeliveryAccepted, "scheduled": DeliveryAccepted, "queued": DeliveryAccepted, "sending": DeliveryAccepted,
		"sent": DeliveryAccepted, "partially_delivered": DeliveryAccepted,
		"delivered": DeliveryDelivered, "read": DeliveryDelivered,
		"undelivered": DeliveryUndelivered, "failed": DeliveryUndelivered, "canceled": DeliveryUndelivered,
		"receiving": "", "received": "", "": "", "mystery": "",
	}
	for status, d := range want {
		if got := Delivery(status); got != d {
			t.Errorf("Delivery(%q) = %q, want %q", status, got, d)
		}
	}
}
