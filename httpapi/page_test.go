package httpapi_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/httpapi"
	"github.com/sessionflow/sessionflow/jsonl"
)

// The page (Options.Page) answers every path outside /v1/ without the
// token, since it holds no session data; the API under /v1/ still wants
// the token, and a page of a tokenless server answers loopback hosts only.
func TestPageIsServedBesideTheAPI(t *testing.T) {
	st := newStore(t, jsonl.CompressionNone, nil)
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "page "+r.URL.Path) })
	a := newAPI(t, httpapi.Options{Store: st, Token: "s3cret", Page: page})
	get := func(base, path, host string) (int, string) {
		req, err := http.NewRequest("GET", base+path, nil)
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get(a.http.URL, "/", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "page /", body)
	code, body = get(a.http.URL, "/app.js", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "page /app.js", body)
	code, _ = get(a.http.URL, "/v1/sessions", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(a.http.URL, "/v1", "")
	require.Equal(t, http.StatusUnauthorized, code)

	b := newAPI(t, httpapi.Options{Store: st, Page: page})
	code, _ = get(b.http.URL, "/", "rebound.example:80")
	require.Equal(t, http.StatusForbidden, code)
	code, body = get(b.http.URL, "/", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "page /", body)
}
