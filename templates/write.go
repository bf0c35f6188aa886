package templates

import (
	"bytes"
	"net/http"

	"github.com/a-h/templ"
)

// Write writes a component as an HTML response. The page is rendered in
// full before the status goes out, so a template that fails becomes the
// server's error page; a client that leaves mid-write is no error of the
// page's.
func Write(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
	return nil
}
