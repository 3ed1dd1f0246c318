package anthropic

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		header map[string]string
		want   time.Duration
	}{
		{nil, 0},
		{map[string]string{"retry-after": "3"}, 3 * time.Second},
		{map[string]string{"retry-after": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"retry-after": "Tue, 01 Dec 2026 08:00:30 GMT"}, 30 * time.Second},
		{map[string]string{"retry-after": "Tue, 01 Dec 2026 07:59:00 GMT"}, 0},
		{map[string]string{"retry-after": "soon"}, 0},
		{map[string]string{"retry-after": "-4"}, 0},
		{map[string]string{"retry-after": "1e12"}, 0},
		{map[string]string{"retry-after-ms": "250", "retry-after": "9"}, 250 * time.Millisecond},
		{map[string]string{"retry-after-ms": "x", "retry-after": "9"}, 9 * time.Second},
	}
	for _, tc := range cases {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.header, got, tc.want)
		}
	}
}
