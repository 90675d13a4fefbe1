package console

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/effectdtype"
)

// sweepForm is the form of the sweep page.
type sweepForm struct {
	Channel, Since, Until string
}

// sweepPage shows the sweep form, its window the last 24 hours.
func (c *console) sweepPage(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UTC()
	c.showSweep(w, r, sweepForm{Channel: r.URL.Query().Get("channel"),
		Since: now.Add(-24 * time.Hour).Format(localTime), Until: now.Format(localTime)}, nil, http.StatusOK, "")
}

// sweep runs a sweep of the form's channel and window through the API and
// shows its report under the form. It changes nothing.
func (c *console) sweep(w http.ResponseWriter, r *http.Request) {
	f := sweepForm{Channel: r.PostFormValue("channel"), Since: r.PostFormValue("since"), Until: r.PostFormValue("until")}
	var since, until time.Time
	var problems []string
	for _, tf := range []struct {
		in, name string
		out      *time.Time
	}{{f.Since, "from", &since}, {f.Until, "to", &until}} {
		if tf.in == "" {
			continue
		}
		t, err := time.Parse(localTime, tf.in)
		if err != nil {
			problems = append(problems, tf.name+": use YYYY-MM-DDTHH:MM (UTC)")
			continue
		}
		*tf.out = t
	}
	if len(problems) > 0 {
		c.showSweep(w, r, f, nil, http.StatusUnprocessableEntity, strings.Join(problems, "; "))
		return
	}
	rep, err := c.client(r).Sweep(r.Context(), f.Channel, since, until)
	if err != nil {
		var e *client.Error
		if !errors.As(err, &e) || e.Status >= 500 && e.Status != http.StatusServiceUnavailable {
			c.apiFailed(w, r, err)
			return
		}
		c.showSweep(w, r, f, nil, e.Status, e.Message)
		return
	}
	c.showSweep(w, r, f, &rep, http.StatusOK, "")
}

// showSweep renders the sweep page with status: the form, and a problem or a report.
func (c *console) showSweep(w http.ResponseWriter, r *http.Request, f sweepForm, rep *client.SweepReport, status int, problem string) {
	chans, err := c.client(r).Channels(r.Context())
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	chans = slices.DeleteFunc(chans, func(ch client.Channel) bool { return ch.Provider == "webhook" })
	c.render(w, r, status, "sweep", "Reconciliation sweep", map[string]any{
		"Form": f, "Channels": chans, "Report": rep, "Problem": problem, "Kinds": effectdtype.FindingKinds})
}
