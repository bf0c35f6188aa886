package web

import (
	"net/http"

	"flashstep/lessons/playground"
	"flashstep/templates"
)

// playgroundPage is the online-softmax playground on its own, on the row
// the URL names (/playground?logits=3,1,-2,8&tile=2&max=on&dtype=f32). A
// URL whose row is invalid still opens the playground, on the default row,
// and says which field was wrong and why.
func (s *Server) playgroundPage(w http.ResponseWriter, r *http.Request) error {
	v := templates.PlaygroundView{}
	set, err := playground.ParseQuery(r.URL.Query())
	if err != nil {
		v.Error = err.Error()
		set = playground.Default
	}
	v.Settings = set
	return render(w, r, http.StatusOK, templates.PlaygroundPage(s.page("Online-softmax playground", "lessons"), v))
}
