package stripesandbox

import (
	"encoding/json"
	"strconv"
	"strings"
)

// idPrefix is the prefix of each kind's ids.
var idPrefix = map[string]string{"refund": "re_", "payment_intent": "pi_", "transfer": "tr_"}

// newObject creates and stores an object of kind from validated form values.
func (e *Emulator) newObject(kind string, form map[string][]string) *object {
	get := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	meta := map[string]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(v) > 0 {
			meta[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o := &object{id: idPrefix[kind] + randomID(24), kind: kind, created: e.Now().Unix(), meta: meta, fields: map[string]string{}}
	amount, _ := strconv.ParseInt(get("amount"), 10, 64)
	m := map[string]any{"id": o.id, "object": kind, "created": o.created, "livemode": false, "metadata": meta}
	nullable := func(k string) any {
		if v := get(k); v != "" {
			return v
		}
		return nil
	}
	switch kind {
	case "refund":
		if amount == 0 {
			amount = 1000 // the emulator knows no charge amounts: a full refund of a made-up 10.00
		}
		o.fields["payment_intent"], o.fields["charge"] = get("payment_intent"), get("charge")
		if o.fields["charge"] == "" {
			o.fields["charge"] = "ch_" + randomID(24)
		}
		m["amount"], m["currency"], m["status"] = amount, "usd", "succeeded"
		m["payment_intent"], m["charge"], m["reason"] = nullable("payment_intent"), o.fields["charge"], nullable("reason")
	case "payment_intent":
		o.fields["customer"] = get("customer")
		status := "requires_payment_method"
		if get("payment_method") != "" {
			status = "requires_confirmation"
			if get("confirm") == "true" {
				status = "succeeded"
			}
		}
		m["amount"], m["amount_received"], m["currency"], m["status"] = amount, 0, strings.ToLower(get("currency")), status
		if status == "succeeded" {
			m["amount_received"] = amount
		}
		m["customer"], m["payment_method"] = nullable("customer"), nullable("payment_method")
		m["client_secret"] = o.id + "_secret_" + randomID(16)
		m["capture_method"], m["confirmation_method"] = "automatic", "automatic"
	case "transfer":
		o.fields["transfer_group"] = get("transfer_group")
		m["amount"], m["amount_reversed"], m["currency"] = amount, 0, strings.ToLower(get("currency"))
		m["destination"], m["transfer_group"], m["reversed"] = get("destination"), nullable("transfer_group"), false
	}
	o.body, _ = json.Marshal(m)
	e.objects = append(e.objects, o)
	e.byID[o.id] = o
	return o
}

// validate checks the parameters of a create request as Stripe does.
func validate(kind string, form map[string][]string) (apiError, bool) {
	has := func(k string) bool { return len(form[k]) > 0 && form[k][0] != "" }
	missing := func(p string) (apiError, bool) {
		return apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: p, Message: "Missing required param: " + p + "."}, false
	}
	if has("amount") {
		if n, err := strconv.ParseInt(form["amount"][0], 10, 64); err != nil || n <= 0 {
			return apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "amount",
				Message: "Invalid positive integer"}, false
		}
	}
	switch kind {
	case "refund":
		if !has("payment_intent") && !has("charge") {
			return apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: "payment_intent",
				Message: "One of the following params should be provided for this request: payment_intent or charge."}, false
		}
	case "payment_intent", "transfer":
		need := []string{"amount", "currency"}
		if kind == "transfer" {
			need = append(need, "destination")
		}
		for _, p := range need {
			if !has(p) {
				return missing(p)
			}
		}
	}
	return apiError{}, true
}
