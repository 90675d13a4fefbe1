package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/dispatcher"
)

// funcs are the helpers the templates use.
var funcs = template.FuncMap{
	"time": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "–"
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if v == nil {
				return "–"
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		}
		return fmt.Sprint(t)
	},
	"age": func(seconds float64) string {
		if seconds <= 0 {
			return "–"
		}
		return (time.Duration(seconds) * time.Second).String()
	},
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"pretty": func(b json.RawMessage) string {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") != nil {
			return string(b)
		}
		return out.String()
	},
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return template.URL(v.Encode())
	},
	"lower":         strings.ToLower,
	"errorExplains": errorExplains,
	"deliveryNote":  dispatcher.DeliveryNote,
}

// parsePages parses each page template together with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", base, err)
		}
		pages[strings.TrimSuffix(base, ".html")] = t
	}
	return pages, nil
}

// view is what every page gets: who is logged in, the CSRF token for its
// forms, a flash message, and the page's own data.
type view struct {
	Title   string
	Who     *api.Principal
	CSRF    string
	Flash   string
	FlashOK bool
	Data    any
}

// render writes page with data.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, page, title string, data any) {
	v := view{Title: title, CSRF: c.csrfToken(w, r), Data: data}
	if p, ok := c.who(r); ok {
		v.Who = &p
	}
	if f := c.sessions.PopString(r.Context(), "flash"); f != "" {
		kind, msg, _ := strings.Cut(f, "\x00")
		v.Flash, v.FlashOK = msg, kind == "ok"
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.log.ErrorContext(r.Context(), "console: render", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// renderError shows msg on the error page.
func (c *console) renderError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", http.StatusText(status), msg)
}
