package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
)

// A 200 answer that is an HTML page (a proxy's login page, a wrong base
// URL) is not retried: the same URL answers the same way. A stream whose
// content type is wrong but that carries events is still read.
func TestHTMLAnswerIsNotRetryable(t *testing.T) {
	s := newService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><html><body>Sign in</body></html>")
	})
	r := collect(context.Background(), s.provider(t, nil), simpleRequest())
	pe := providerError(t, r.err)
	if pe.Retryable || pe.Code != "not_event_stream" || pe.Status != 200 || len(r.chunks) != 0 {
		t.Fatalf("error %+v, chunks %+v: want a non-retryable not_event_stream error", pe, r.chunks)
	}

	s = newService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		sse(w, chunk(`{"content":"hi"}`, "stop"), "[DONE]")
	})
	r = collect(context.Background(), s.provider(t, nil), simpleRequest())
	if r.err != nil || len(r.chunks) != 2 || r.chunks[0].Delta != "hi" {
		t.Fatalf("error %v, chunks %+v: want the streamed answer", r.err, r.chunks)
	}
}
