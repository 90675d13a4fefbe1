package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/statemachine"
)

// channelRow is one channel on the overview.
type channelRow struct {
	client.Channel
	Stats client.ChannelStats
}

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	api := c.client(r)
	chans, err := api.Channels(r.Context())
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	stats, err := api.Stats(r.Context())
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	rows := make([]channelRow, 0, len(chans))
	var inDoubt int64
	for _, ch := range chans {
		st := stats.Channels[ch.Name]
		rows = append(rows, channelRow{Channel: ch, Stats: st})
		inDoubt += ch.Counts[statemachine.InDoubt]
	}
	charts, err := c.charts(r, "", "/ui/")
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", map[string]any{
		"Channels": rows, "States": statemachine.States, "InDoubt": inDoubt, "Charts": charts})
}

// deliveries are the known deliveries the list filters by, in order of progress.
var deliveries = slices.DeleteFunc(slices.Clone(statemachine.Deliveries), func(d statemachine.Delivery) bool { return !d.Valid() })

// listForm is the filter form of the intents page.
type listForm struct {
	Status, Channel, Delivery, Q, Since, Until string
	After                                      int64
}

// datetime-local inputs carry no zone: the console reads and shows UTC.
const localTime = "2006-01-02T15:04"

func (c *console) intents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := listForm{Status: q.Get("status"), Channel: q.Get("channel"), Delivery: q.Get("delivery"),
		Q: strings.TrimSpace(q.Get("q")), Since: q.Get("since"), Until: q.Get("until")}
	f.After, _ = strconv.ParseInt(q.Get("after"), 10, 64)
	filter := client.Filter{Status: f.Status, Channel: f.Channel, Delivery: f.Delivery, Q: f.Q, After: f.After, Limit: 50}
	var problems []string
	for _, tf := range []struct {
		in  string
		out *time.Time
		n   string
	}{{f.Since, &filter.Since, "from"}, {f.Until, &filter.Until, "to"}} {
		if tf.in == "" {
			continue
		}
		t, err := time.Parse(localTime, tf.in)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: use YYYY-MM-DDTHH:MM (UTC)", tf.n))
			continue
		}
		*tf.out = t
	}
	api := c.client(r)
	var page client.IntentPage
	var err error
	if len(problems) == 0 {
		page, err = api.ListIntents(r.Context(), filter)
		if err != nil {
			var e *client.Error
			if !errors.As(err, &e) || e.Status >= 500 {
				c.apiFailed(w, r, err)
				return
			}
			problems = append(problems, e.Message)
		}
	}
	chans, err := api.Channels(r.Context())
	if err != nil {
		c.apiFailed(w, r, err)
		return
	}
	next := ""
	if page.Next != nil {
		v := r.URL.Query()
		v.Set("after", strconv.FormatInt(*page.Next, 10))
		next = "/ui/intents?" + v.Encode()
	}
	p, _ := c.who(r)
	c.render(w, r, http.StatusOK, "intents", "Intents", map[string]any{
		"Form": f, "Intents": page.Intents, "Next": next, "Problems": problems, "Channels": chans,
		"States": statemachine.States, "Deliveries": deliveries,
		"BulkActions": bulkActions, "CanOperate": p.Can("operate")})
}
