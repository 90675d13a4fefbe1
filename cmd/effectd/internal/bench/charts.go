package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/fixture"
)

// loadChartHistory fills the console charts' history (migrations 024 and
// 027) as eight days of traffic on every channel leave it, whatever the
// intents loaded: a rollup row a minute per channel and for the whole system,
// three latency slots each, the hour rows that sum them (as the fold keeps
// them), and an audit entry every twenty minutes. The rollups are kept as
// changes happen and pruned after eight days, so this is their size at any
// number of retained intents; loading it again changes nothing (the makers
// keep the rows there are, and the audit entries are made once).
func loadChartHistory(ctx context.Context, pool *pgxpool.Pool) error {
	rows, _ := pool.Query(ctx, `SELECT name FROM effectd.channels ORDER BY name`)
	channels, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("charts' history: %w", err)
	}
	channels = append(channels, "*") // the whole system
	var audited bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM effectd.audit WHERE actor = 'bench')`).Scan(&audited); err != nil {
		return fmt.Errorf("charts' history: %w", err)
	}
	now := time.Now()
	minutes := make([]time.Time, 8*1440+1)
	hours := map[time.Time]int64{} // the minutes of each hour
	for n := range minutes {
		minutes[n] = now.Truncate(time.Minute).Add(-time.Duration(n) * time.Minute)
		hours[minutes[n].Truncate(time.Hour)]++
	}
	if err := fixture.Make(func(t fixture.TB) {
		chartRollups(t, pool, channels, minutes, hours)
		if !audited {
			chartAudit(t, pool, channels[0], now)
		}
	}); err != nil {
		return fmt.Errorf("charts' history: %w", err)
	}
	_, err = pool.Exec(ctx, `ANALYZE effectd.minute_rollups, effectd.minute_latency, effectd.hour_rollups, effectd.hour_latency, effectd.audit`)
	return err
}

// chartRollups makes a minute rollup of each channel at each of minutes and
// an hour rollup of each of hours summing its minutes: a minute of 120 sent,
// 3 failed, 1 in doubt, 100 delivered, 4 provider errors and 2 backoffs, a
// backlog of 40 due for 1.5 s, and 40 calls in each of latency slots 16 to 18.
func chartRollups(t fixture.TB, db fixture.DB, channels []string, minutes []time.Time, hours map[time.Time]int64) {
	rollup := func(channel string, at time.Time, k int64) fixture.Rollup {
		return fixture.Rollup{Channel: channel, At: at, Sent: 120 * k, Failed: 3 * k, InDoubt: k, Delivered: 100 * k,
			ProviderErrors: 4 * k, Backoffs: 2 * k, Backlog: 40, OldestDueSeconds: 1.5,
			Latency: map[int]int64{16: 40 * k, 17: 40 * k, 18: 40 * k}}
	}
	fixture.AddMinuteRollups(t, db, len(channels)*len(minutes), func(n int) fixture.Rollup {
		return rollup(channels[(n-1)%len(channels)], minutes[(n-1)/len(channels)], 1)
	})
	var each []fixture.Rollup
	for hour, k := range hours {
		for _, c := range channels {
			each = append(each, rollup(c, hour, k))
		}
	}
	fixture.AddHourRollups(t, db, len(each), func(n int) fixture.Rollup { return each[n-1] })
}

// chartAudit makes an audit entry every twenty minutes over eight days,
// pauses of channel by the bench: the charts' marks.
func chartAudit(t fixture.TB, db fixture.DB, channel string, now time.Time) {
	entries := make([]fixture.AuditEntry, 8*72)
	for k := range entries {
		entries[k] = fixture.AuditEntry{At: now.Add(-time.Duration(k+1) * 20 * time.Minute), Actor: "bench",
			Action: "channel.pause", Channel: channel}
	}
	fixture.AddAudit(t, db, entries...)
}

// csrfField finds the login form's CSRF token.
var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// readsClient returns the client the scale reads are made with: it keeps
// cookies, and is logged in to the console at base (serve runs with
// --insecure-no-auth: any token logs in), so the console's pages are timed
// as a person's browser gets them.
func readsClient(ctx context.Context, base string) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: time.Minute}
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/ui/login", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("console login page: %w", err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("console login page: no CSRF token in %d bytes", len(page))
	}
	form := url.Values{"csrf": {string(m[1])}, "token": {"bench"}}
	req, err = http.NewRequestWithContext(ctx, "POST", base+"/ui/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err = client.Do(req); err != nil {
		return nil, fmt.Errorf("console login: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/" {
		return nil, fmt.Errorf("console login: ended at %s (%d), want /ui/", resp.Request.URL.Path, resp.StatusCode)
	}
	return client, nil
}
