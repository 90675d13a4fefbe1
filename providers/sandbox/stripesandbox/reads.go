package stripesandbox

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// faulted applies the fault to a read before route runs: no answer after a
// hang, the injected error, or a dropped connection without reading.
func (e *Emulator) faulted(route emu.Route) emu.Route {
	return func(r *http.Request) emu.Reply {
		d, ok := e.Draw(r)
		switch {
		case !ok:
			return emu.NoAnswer(d)
		case d.Error != 0:
			return d.ErrorReply(injectedError(d.Error))
		case d.Drop:
			return emu.Reply{Fault: d}
		}
		return route(r)
	}
}

// retrieve handles GET /v1/{kind}s/{id}.
func (e *Emulator) retrieve(r *http.Request, kind string) emu.Reply {
	id := r.PathValue("id")
	e.mu.Lock()
	o, ok := e.byID[id]
	var body []byte
	if ok {
		body = o.body
	}
	e.mu.Unlock()
	if !ok || o.kind != kind {
		return reply(http.StatusNotFound, errorBody(apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "id",
			Message: fmt.Sprintf("No such %s: '%s'", strings.ReplaceAll(kind, "_", ""), id)}))
	}
	rep := reply(http.StatusOK, body)
	rep.Ref = id
	return rep
}

// list handles GET /v1/{kind}s: newest first, filtered by created (see
// createdRange) and by payment_intent, charge, customer or transfer_group,
// paginated by starting_after and limit.
func (e *Emulator) list(r *http.Request, kind string) emu.Reply {
	q := r.Form
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return reply(http.StatusBadRequest, errorBody(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "limit",
				Message: "This value must be between 1 and 100 (it is currently " + v + ")."}))
		}
		limit = n
	}
	created, bad := createdRange(q)
	if bad != "" {
		return reply(http.StatusBadRequest, errorBody(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: bad,
			Message: "Invalid integer: " + q.Get(bad)}))
	}
	filters := map[string]string{}
	for _, f := range []string{"payment_intent", "charge", "customer", "transfer_group"} {
		if v := q.Get(f); v != "" {
			filters[f] = v
		}
	}
	after := q.Get("starting_after")

	e.mu.Lock()
	var data []json.RawMessage
	hasMore, skipping := false, after != ""
	for i := len(e.objects) - 1; i >= 0; i-- {
		o := e.objects[i]
		if skipping {
			skipping = o.id != after
			continue
		}
		if o.kind != kind || !created.holds(o.created) || !match(o.fields, filters) {
			continue
		}
		if len(data) == limit {
			hasMore = true
			break
		}
		data = append(data, o.body)
	}
	e.mu.Unlock()
	return listReply(r, "list", data, hasMore)
}

// createdFilter is the range of created a list allows, in Unix seconds, both ends inclusive.
type createdFilter struct{ from, to int64 }

func (rg createdFilter) holds(t int64) bool { return rg.from <= t && t <= rg.to }

// createdRange reads the created filter as Stripe takes it: created=T
// for one second, or any of created[gt], created[gte], created[lt] and
// created[lte]. bad names a parameter that is not an integer.
func createdRange(q map[string][]string) (rg createdFilter, bad string) {
	rg = createdFilter{from: math.MinInt64, to: math.MaxInt64}
	for _, p := range []string{"created", "created[gt]", "created[gte]", "created[lt]", "created[lte]"} {
		v := q[p]
		if len(v) == 0 || v[0] == "" {
			continue
		}
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return rg, p
		}
		switch p {
		case "created":
			rg.from, rg.to = max(rg.from, n), min(rg.to, n)
		case "created[gt]":
			rg.from = max(rg.from, n+1)
		case "created[gte]":
			rg.from = max(rg.from, n)
		case "created[lt]":
			rg.to = min(rg.to, n-1)
		case "created[lte]":
			rg.to = min(rg.to, n)
		}
	}
	return rg, ""
}

func match(fields, filters map[string]string) bool {
	for k, v := range filters {
		if fields[k] != v {
			return false
		}
	}
	return true
}

// searchClause is one term of Stripe's search query language that the
// emulator understands: metadata['key']:'value' or field:'value'.
var searchClause = regexp.MustCompile(`^(metadata\['([^']*)'\]|[a-z_]+):'((?:[^'\\]|\\.)*)'$`)

// search handles GET /v1/{kind}s/search. It is immediately consistent, which
// Stripe's is not; clients must not rely on a miss either way.
func (e *Emulator) search(r *http.Request, kind string) emu.Reply {
	meta, fields := map[string]string{}, map[string]string{}
	for _, term := range strings.Split(r.Form.Get("query"), " AND ") {
		m := searchClause.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			return reply(http.StatusBadRequest, errorBody(apiError{Type: "invalid_request_error", Param: "query",
				Message: "sandbox: unsupported search query term " + strconv.Quote(term) + " (supported: metadata['k']:'v' and field:'v', joined by AND)"}))
		}
		value := strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[3])
		if m[2] != "" {
			meta[m[2]] = value
		} else {
			fields[m[1]] = value
		}
	}
	e.mu.Lock()
	var data []json.RawMessage
	for i := len(e.objects) - 1; i >= 0 && len(data) < 100; i-- {
		if o := e.objects[i]; o.kind == kind && match(o.meta, meta) && match(o.fields, fields) {
			data = append(data, o.body)
		}
	}
	e.mu.Unlock()
	return listReply(r, "search_result", data, false)
}

// listReply is the answer of a list or a search: Stripe's list object.
func listReply(r *http.Request, object string, data []json.RawMessage, hasMore bool) emu.Reply {
	if data == nil {
		data = []json.RawMessage{}
	}
	out := map[string]any{"object": object, "data": data, "has_more": hasMore, "url": r.URL.Path}
	if object == "search_result" {
		out["next_page"] = nil
	}
	b, _ := json.Marshal(out)
	return reply(http.StatusOK, b)
}
