package provider

import (
	"math"
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
