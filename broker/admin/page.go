package admin

import (
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
)

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"summary": formatSummary,
	"age": func(s float64) string {
		if s < 0 {
			return "never"
		}
		return fmt.Sprintf("%.1fs", s)
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>kaas actors</title>
<style>
body{font-family:system-ui,sans-serif;margin:1em}
table{border-collapse:collapse}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;font-size:13px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:12px}
</style></head><body>
<h1>kaas actors</h1>
<p>{{len .Actors}} actors at {{.Time.Format "15:04:05"}} · <a href="/metrics">/metrics</a> · <a href="/api/actors">JSON</a>
<form method="get"><input name="filter" placeholder="filter by name" value="{{.Filter}}"> <button>filter</button></form></p>
<table><tr><th>kind</th><th>name</th><th>mailbox</th><th>msgs/s</th><th>last message</th><th>state</th></tr>
{{range .Actors}}<tr><td>{{.Kind}}</td><td><a href="/api/actors/{{.Name}}">{{.Name}}</a></td><td class="n">{{.MailboxDepth}}</td><td class="n">{{printf "%.1f" .MessagesPerSec}}</td><td class="n">{{age .LastMessageAgeSec}}</td><td><code>{{summary .Summary}}</code></td></tr>
{{end}}</table>
<h2>connections</h2>
<table><tr><th>listener</th><th>remote</th><th>principal</th><th>SASL</th><th>TLS</th><th>opened</th></tr>
{{range .Connections}}<tr><td>{{.Listener}}</td><td>{{.Remote}}</td><td>{{.Principal}}{{if not .Authenticated}} (authenticating){{end}}</td><td>{{.Mechanism}}</td><td>{{.TLSVersion}}</td><td>{{.Opened.Format "15:04:05"}}</td></tr>
{{end}}</table></body></html>
`))

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	f := filterFrom(r)
	snap := s.snapshot(f)
	sortActors(snap.Actors)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	err := page.Execute(w, struct {
		Snapshot
		Filter      string
		Connections []Connection
	}{snap, f.Match, s.connections()})
	if err != nil {
		s.cfg.Logger.Warn("rendering the admin page", "err", err)
	}
}

// formatSummary renders a digest as "key=value key=value", keys sorted.
func formatSummary(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", k, m[k])
	}
	return b.String()
}
