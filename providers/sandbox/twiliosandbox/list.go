package twiliosandbox

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// listFilter is a list request's filter.
type listFilter struct {
	account, to, from string
	sentFrom, sentTo  time.Time // inclusive, exclusive; zero = open
	bySent            bool      // some DateSent filter is set: queued messages never match
}

// readListFilter reads a list request's filter: the path's account, To, From
// and the DateSent filters. bad is Twilio's message for a DateSent that is
// not a date, else "".
func readListFilter(r *http.Request, q url.Values) (flt listFilter, bad string) {
	flt = listFilter{account: r.PathValue("sid"), to: q.Get("To"), from: q.Get("From")}
	for _, name := range []string{"DateSent", "DateSent>", "DateSent<"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, dateOnly, err := parseDate(v)
		if err != nil {
			return flt, "Invalid " + name + ": " + v
		}
		flt.bySent = true
		switch {
		case name == "DateSent":
			day := t.Truncate(24 * time.Hour)
			flt.sentFrom, flt.sentTo = day, day.Add(24*time.Hour)
		case name == "DateSent>":
			flt.sentFrom = t
		case dateOnly: // DateSent<=day includes the whole day
			flt.sentTo = t.Add(24 * time.Hour)
		default:
			flt.sentTo = t.Add(time.Second)
		}
	}
	return flt, ""
}

// list handles GET Messages.json: the account's messages newest first,
// filtered by To, From and DateSent, in pages of PageSize.
func (e *Emulator) list(r *http.Request) emu.Reply {
	q := r.URL.Query()
	flt, bad := readListFilter(r, q)
	if bad != "" {
		return fail(http.StatusBadRequest, 20001, bad)
	}
	pageSize, bad := intParam(q, "PageSize", 50, 1, 1000)
	if bad != "" {
		return fail(http.StatusBadRequest, 20001, bad)
	}
	page, bad := intParam(q, "Page", 0, 0, 1<<30)
	if bad != "" {
		return fail(http.StatusBadRequest, 20001, bad)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.Now()
	// Newest first. A PageToken ("PA" + SID of the previous page's last
	// message) anchors the page, so messages created meanwhile do not shift it.
	start := len(e.msgs) - 1
	if tok := q.Get("PageToken"); tok != "" {
		i, ok := e.bySID[strings.TrimPrefix(tok, "PA")]
		if !ok {
			return fail(http.StatusBadRequest, 20001, "Invalid PageToken: "+tok)
		}
		start = i - 1
	} else if page > 0 {
		return fail(http.StatusBadRequest, 20001, "Page without PageToken")
	}
	msgs := []map[string]any{}
	next, last := any(nil), ""
	for i := start; i >= 0; i-- {
		m := e.msgs[i]
		if !e.matches(m, flt, now) {
			continue
		}
		if len(msgs) == pageSize {
			nq := filterQuery(q, pageSize)
			nq.Set("Page", strconv.Itoa(page+1))
			nq.Set("PageToken", "PA"+last)
			next = r.URL.Path + "?" + nq.Encode()
			break
		}
		msgs = append(msgs, e.render(m, now))
		last = m.SID
	}
	first := filterQuery(q, pageSize)
	first.Set("Page", "0")
	return emu.JSON(http.StatusOK, map[string]any{
		"messages":          msgs,
		"uri":               r.URL.RequestURI(),
		"first_page_uri":    r.URL.Path + "?" + first.Encode(),
		"next_page_uri":     next,
		"previous_page_uri": nil,
		"page":              page,
		"page_size":         pageSize,
		"start":             page * pageSize,
		"end":               page*pageSize + max(len(msgs)-1, 0),
	})
}

// matches reports whether m passes flt at now. The caller holds e.mu.
func (e *Emulator) matches(m Message, flt listFilter, now time.Time) bool {
	if m.AccountSID != flt.account || (flt.to != "" && m.To != flt.to) || (flt.from != "" && m.From != flt.from) {
		return false
	}
	if !flt.bySent {
		return true
	}
	sent, ok := e.sentAt(m, now)
	return ok && !sent.Before(flt.sentFrom) && (flt.sentTo.IsZero() || sent.Before(flt.sentTo))
}

// parseDate reads a DateSent filter: an RFC 3339 time or a YYYY-MM-DD day.
func parseDate(v string) (t time.Time, dateOnly bool, err error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true, nil
	}
	t, err = time.Parse(time.RFC3339, v)
	return t, false, err
}

// intParam reads an integer query parameter within [lo, hi], def when
// absent. bad is Twilio's message for a value that is not one, else "".
func intParam(q url.Values, name string, def, lo, hi int) (n int, bad string) {
	v := q.Get(name)
	if v == "" {
		return def, ""
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Sprintf("Invalid %s: %q", name, v)
	}
	return n, ""
}

// filterQuery copies the filters of q, for page links.
func filterQuery(q url.Values, pageSize int) url.Values {
	out := url.Values{}
	for _, k := range []string{"To", "From", "DateSent", "DateSent>", "DateSent<"} {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	out.Set("PageSize", strconv.Itoa(pageSize))
	return out
}
