package console

import (
	"errors"
	"net/http"

	"github.com/effectd/effectd/api/client"
)

// apiFailed shows an error the API answered: a missing object as a 404 page,
// anything else as the API's message.
func (c *console) apiFailed(w http.ResponseWriter, r *http.Request, err error) {
	var e *client.Error
	if errors.As(err, &e) {
		c.renderError(w, r, e.Status, e.Message)
		return
	}
	c.log.ErrorContext(r.Context(), "console: admin API", "path", r.URL.Path, "err", err)
	c.renderError(w, r, http.StatusBadGateway, "The admin API did not answer; try again.")
}

// apiMessage is the text to show for an API error.
func apiMessage(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
