package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// scraper GETs serve's /metrics every interval while a drain runs, as a
// Prometheus would: the breakdown's toggle for the cost of being scraped.
type scraper struct {
	n    int // scrapes answered 200
	err  error
	stop chan struct{}
	done chan struct{}
}

// scrapeMetrics starts scraping base+"/metrics" every interval; nil when
// interval is 0.
func scrapeMetrics(ctx context.Context, base string, interval time.Duration) *scraper {
	if interval <= 0 {
		return nil
	}
	s := &scraper{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.scrape(ctx, client, base+"/metrics"); err != nil && s.err == nil {
				s.err = err
			}
		}
	}()
	return s
}

func (s *scraper) scrape(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	s.n++
	return nil
}

// end stops the scraper and returns how many scrapes answered.
func (s *scraper) end() (int, error) {
	if s == nil {
		return 0, nil
	}
	close(s.stop)
	<-s.done
	return s.n, s.err
}
