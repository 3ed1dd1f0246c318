package provider_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/provider"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		ms, s string
		want  time.Duration
	}{
		{"", "", 0},
		{"", "3", 3 * time.Second},
		{"", " 3 ", 3 * time.Second},
		{"", "0.5", 500 * time.Millisecond},
		{"", "0", 0},
		{"", "-4", 0},
		{"", "soon", 0},
		{"", "1e12", 0},
		{"", "1e300", 0},
		{"", "Tue, 01 Dec 2026 08:00:30 GMT", 30 * time.Second},
		{"", "Tue, 01 Dec 2026 07:59:00 GMT", 0},
		{"", "Wed, 02 Dec 2026 07:59:59 GMT", 23*time.Hour + 59*time.Minute + 59*time.Second},
		{"", "Wed, 02 Dec 2026 08:00:00 GMT", 0},
		{"", "Wed, 01 Dec 2027 08:00:00 GMT", 0},
		{"250", "9", 250 * time.Millisecond},
		{"-5", "3", 3 * time.Second},
		{"x", "9", 9 * time.Second},
		{"soon", "", 0},
	}
	for _, tc := range cases {
		h := http.Header{}
		if tc.ms != "" {
			h.Set("Retry-After-Ms", tc.ms)
		}
		if tc.s != "" {
			h.Set("Retry-After", tc.s)
		}
		if got := provider.RetryAfter(h, now); got != tc.want {
			t.Errorf("retry-after-ms %q, retry-after %q: %v, want %v", tc.ms, tc.s, got, tc.want)
		}
	}
}

func TestRedact(t *testing.T) {
	cases := []struct{ s, key, want string }{
		{"key sk-1 and sk-1 again", "sk-1", "key [redacted] and [redacted] again"},
		{"no key here", "sk-1", "no key here"},
		{"an empty key redacts nothing", "", "an empty key redacts nothing"},
	}
	for _, tc := range cases {
		if got := provider.Redact(tc.s, tc.key); got != tc.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", tc.s, tc.key, got, tc.want)
		}
	}
}
