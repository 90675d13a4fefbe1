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

	"github.com/jackc/pgx/v5/pgxpool"
)

// chartHistorySQL fills the console charts' history (migrations 024 and 027)
// as eight days of traffic on every channel leave it, whatever the intents
// loaded: a rollup row a minute per channel and for the whole system, three
// latency slots each, the hour rows that sum them (as the fold keeps them),
// and an audit entry every twenty minutes. The rollups are kept
// as changes happen and pruned after eight days, so this is their size at any
// number of retained intents; loading it again changes nothing.
const chartHistorySQL = `
WITH c AS (SELECT name FROM effectd.channels UNION ALL SELECT '*'),
m AS (SELECT date_trunc('minute', now()) - n * interval '1 minute' AS minute FROM generate_series(0, 8 * 1440) n),
r AS (
    INSERT INTO effectd.minute_rollups (channel, minute, sent, failed, in_doubt, delivered, provider_errors, backoffs, backlog, oldest_due_seconds)
    SELECT c.name, m.minute, 120, 3, 1, 100, 4, 2, 40, 1.5 FROM c, m
    ON CONFLICT DO NOTHING
),
l AS (
    INSERT INTO effectd.minute_latency (channel, minute, slot, n)
    SELECT c.name, m.minute, s, 40 FROM c, m, generate_series(16, 18) s
    ON CONFLICT DO NOTHING
),
h AS (
    INSERT INTO effectd.hour_rollups (channel, hour, sent, failed, in_doubt, delivered, provider_errors, backoffs, backlog, oldest_due_seconds)
    SELECT c.name, date_trunc('hour', m.minute, 'UTC'), 120 * count(*), 3 * count(*), count(*), 100 * count(*), 4 * count(*), 2 * count(*), 40, 1.5
    FROM c, m GROUP BY 1, 2
    ON CONFLICT DO NOTHING
),
hl AS (
    INSERT INTO effectd.hour_latency (channel, hour, slot, n)
    SELECT c.name, date_trunc('hour', m.minute, 'UTC'), s, 40 * count(*) FROM c, m, generate_series(16, 18) s GROUP BY 1, 2, 3
    ON CONFLICT DO NOTHING
)
INSERT INTO effectd.audit (at, actor, action, channel)
SELECT now() - n * interval '20 minutes', 'bench', 'channel.pause', (SELECT min(name) FROM effectd.channels)
FROM generate_series(1, 8 * 72) n
WHERE NOT EXISTS (SELECT 1 FROM effectd.audit WHERE actor = 'bench')`

// loadChartHistory writes chartHistorySQL's rows.
func loadChartHistory(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, chartHistorySQL); err != nil {
		return fmt.Errorf("charts' history: %w", err)
	}
	_, err := pool.Exec(ctx, `ANALYZE effectd.minute_rollups, effectd.minute_latency, effectd.hour_rollups, effectd.hour_latency, effectd.audit`)
	return err
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
