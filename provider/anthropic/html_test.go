package anthropic_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// A 200 answer that is an HTML page (a proxy's login page, a wrong base
// URL) is not retried: the same URL answers the same way.
func TestHTMLAnswerIsNotRetryable(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><html><body>Sign in</body></html>")
	})
	_, err := collect(t, f.provider(t), simpleRequest())
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Retryable || pe.Code != "not_event_stream" || pe.Status != 200 {
		t.Fatalf("error %v (%+v), want a non-retryable not_event_stream error", err, pe)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests", n)
	}
}
