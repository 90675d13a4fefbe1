// Package ingress receives provider events on a listener of its own, apart
// from the admin API so that it can face the internet: Twilio status
// callbacks (POST /ingress/twilio/{channel}, verified by X-Twilio-Signature)
// and Stripe events (POST /ingress/stripe/{channel}, verified by
// Stripe-Signature). A verified event is mapped to a delivery and handed to a
// Recorder, which stores it once and applies it in one transaction.
// openapi.yaml beside this file describes the routes and their answers.
package ingress
