// Package webui holds the sessionflow web view: a page, embedded in the
// binary, that lists a store's sessions and shows one session's transcript,
// live text, pending approvals and controls, all through the HTTP session
// API (docs/API.md "HTTP API", "Web view"). It holds static files and the
// handler that serves them; it imports nothing of sessionflow.
package webui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
)

//go:embed static
var static embed.FS

// Options configure the page.
type Options struct {
	// TemporalUI is the base address of the Temporal Web UI
	// (http://localhost:8233 for the dev server); when set, a session's
	// page links to its workflow there.
	TemporalUI string
	// Namespace is the Temporal namespace of the session workflows; default
	// "default".
	Namespace string
}

// pageConfig is what the page reads from config.json.
type pageConfig struct {
	TemporalUI string `json:"temporalUI"`
	Namespace  string `json:"namespace"`
	API        string `json:"api"`
}

// Handler serves the page: index.html at "/", its script and style sheet,
// and config.json from opts. It answers only GET and HEAD, and only for
// the embedded files: no request reaches the filesystem.
func Handler(opts Options) (http.Handler, error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.TemporalUI != "" {
		u, err := url.Parse(opts.TemporalUI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &OptionError{Field: "TemporalUI", Value: opts.TemporalUI}
		}
	}
	cfg, err := json.Marshal(pageConfig{TemporalUI: strings.TrimRight(opts.TemporalUI, "/"), Namespace: opts.Namespace, API: "v1"})
	if err != nil {
		return nil, err
	}
	files, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		switch r.URL.Path {
		case "/config.json":
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			_, _ = w.Write(cfg)
			return
		case "/", "/index.html", "/app.js", "/app.css":
			h.Set("Cache-Control", "no-cache")
			fileServer.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}), nil
}

// OptionError reports an invalid option.
type OptionError struct {
	// Field names the option; Value is what it was given.
	Field, Value string
}

func (e *OptionError) Error() string {
	return "webui: invalid " + e.Field + " " + `"` + e.Value + `"` + ": want an http or https address with a host"
}
