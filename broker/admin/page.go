package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// web holds the page: index.html, its script and style, and the vendored
// charting library (uPlot, MIT, in web/vendor/uplot with its licence). All
// of it is in the binary, so the inspector works with no network.
//
//go:embed web
var web embed.FS

// pageRoutes are the URLs that name a view; each serves index.html and
// the script renders the view the path names (deep links).
var pageRoutes = []string{"/{$}", "/actors/{name...}", "/kip360", "/transactions"}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	page, err := web.ReadFile("web/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(page)
}

// assetHandler serves web/ under /assets/.
func assetHandler() http.Handler {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return http.StripPrefix("/assets/", http.FileServerFS(sub))
}
