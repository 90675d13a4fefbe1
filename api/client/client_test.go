package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestErrorOnOneLine: an error answer reads as one line "<code>: <message>",
// the API's JSON as well as a proxy's page, which is cut short.
func TestErrorOnOneLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{409, `{"error":{"code":"conflict","message":"the intent is SENT,\nand retry applies only to FAILED"}}`,
			"conflict: the intent is SENT, and retry applies only to FAILED"},
		{502, "<html>\n<body>\n  Bad   gateway\n</body>\n</html>\n", "http_502: <html> <body> Bad gateway </body> </html>"},
		{502, strings.Repeat("x", 500), "http_502: " + strings.Repeat("x", maxForeignMessage) + "…"},
		{503, "", "http_503: Service Unavailable"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		_, err := (&Client{BaseURL: srv.URL}).ListIntents(context.Background(), Filter{})
		srv.Close()
		var apiErr *Error
		if !errors.As(err, &apiErr) || apiErr.Error() != tc.want || apiErr.Status != tc.status {
			t.Errorf("%d %.40q: %v, want %q", tc.status, tc.body, err, tc.want)
		}
	}
}
