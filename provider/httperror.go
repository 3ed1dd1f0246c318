package provider

import (
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter bounds the delay RetryAfter accepts, as a number or as a
// date: a longer one is not a delay a caller can wait for, so it counts as
// none.
const maxRetryAfter = 24 * time.Hour

// RetryAfter reads the delay an HTTP response asks for before the next call:
// retry-after-ms (milliseconds), else retry-after (seconds, or an HTTP date
// after now). It is 0 when neither gives a positive delay, or when the
// delay given is a day or more.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if d, ok := parseDelay(h.Get("retry-after-ms"), time.Millisecond); ok {
		return d
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if d, ok := parseDelay(v, time.Second); ok {
		return d
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) && t.Sub(now) < maxRetryAfter {
		return t.Sub(now)
	}
	return 0
}

// parseDelay parses v as a number of units; ok is false unless it is a
// positive delay shorter than maxRetryAfter.
func parseDelay(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f >= float64(maxRetryAfter/unit) {
		return 0, false
	}
	return time.Duration(f * float64(unit)), true
}

// Redact returns s with every occurrence of key replaced by "[redacted]"; s
// itself when key is empty.
func Redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// CodeNotEventStream is the code of a successful (2xx) response to a
// streaming call whose body is not an event stream and held no event: an
// HTML page of a proxy, a login portal or a wrong base URL. Not retryable:
// the same URL answers the same way (docs/API.md "Model call limits").
const CodeNotEventStream = "not_event_stream"

// NotEventStream returns the non-retryable error of res, a successful
// response to a streaming call from which no event was read, when its
// Content-Type is not text/event-stream; nil otherwise.
func NotEventStream(res *http.Response) *Error {
	if res == nil || res.StatusCode < 200 || res.StatusCode > 299 {
		return nil
	}
	ct := res.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "text/event-stream" {
		return nil
	}
	return &Error{Status: res.StatusCode, Code: CodeNotEventStream,
		Message: fmt.Sprintf("the service answered %d with content type %q and no event, not an event stream (is the base URL right?)", res.StatusCode, ct)}
}
