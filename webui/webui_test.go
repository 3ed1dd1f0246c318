package webui_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/webui"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

// The page, its script and style sheet are served from the binary, with a
// content security policy that lets the page talk only to its own origin.
func TestServesThePage(t *testing.T) {
	h, err := webui.Handler(webui.Options{})
	require.NoError(t, err)

	r := get(t, h, http.MethodGet, "/")
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Contains(t, r.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body(t, r), `<script src="app.js"></script>`)
	require.Contains(t, r.Header.Get("Content-Security-Policy"), "connect-src 'self'")
	require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))

	r = get(t, h, http.MethodGet, "/app.js")
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Contains(t, r.Header.Get("Content-Type"), "javascript")
	require.Contains(t, body(t, r), "function sessionView(")

	r = get(t, h, http.MethodGet, "/app.css")
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Contains(t, r.Header.Get("Content-Type"), "text/css")
}

// config.json tells the page where the Temporal UI is; the namespace
// defaults to "default".
func TestConfig(t *testing.T) {
	h, err := webui.Handler(webui.Options{TemporalUI: "http://127.0.0.1:8233/"})
	require.NoError(t, err)
	r := get(t, h, http.MethodGet, "/config.json")
	require.Equal(t, http.StatusOK, r.StatusCode)
	var cfg map[string]string
	require.NoError(t, json.Unmarshal([]byte(body(t, r)), &cfg))
	require.Equal(t, map[string]string{"temporalUI": "http://127.0.0.1:8233", "namespace": "default", "api": "v1"}, cfg)
}

// Only the embedded files are served, only to GET and HEAD: a path that
// names anything else, however spelled, is not found.
func TestServesNothingElse(t *testing.T) {
	h, err := webui.Handler(webui.Options{})
	require.NoError(t, err)
	for _, p := range []string{"/static/app.js", "/../webui.go", "/webui.go", "/%2e%2e/go.mod", "/app.js/", "/.", "/static"} {
		r := get(t, h, http.MethodGet, p)
		require.NotEqual(t, http.StatusOK, r.StatusCode, p)
		require.False(t, strings.Contains(body(t, r), "package webui"), p)
	}
	r := get(t, h, http.MethodPost, "/")
	require.Equal(t, http.StatusMethodNotAllowed, r.StatusCode)
	require.Equal(t, "GET, HEAD", r.Header.Get("Allow"))
}

// A Temporal UI address that is not an http(s) address with a host is
// refused with a typed error.
func TestRefusesABadTemporalUIAddress(t *testing.T) {
	for _, bad := range []string{"javascript:alert(1)", "localhost:8233", "ftp://x", "http://"} {
		_, err := webui.Handler(webui.Options{TemporalUI: bad})
		var oe *webui.OptionError
		require.True(t, errors.As(err, &oe), bad)
		require.Equal(t, "TemporalUI", oe.Field)
	}
}
