package openai

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestWatchedBodyFindsDoneAcrossReads(t *testing.T) {
	cases := map[string]bool{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n": true,
		"data: [DONE]\n\n":                    true, // the body's first line
		"data:[DONE]\n\n":                     true,
		"data: {\"c\":\"data: [DONE]\"}\n\n":  false,
		"data: {\"a\":1}\n\n":                 false,
		": data: [DONE]\n\n":                  false, // a comment line
	}
	for body, want := range cases {
		// One byte per read: the marker always spans reads.
		b := &watchedBody{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), tail: []byte{'\n'}}
		if _, err := io.ReadAll(b); err != nil {
			t.Fatal(err)
		}
		if b.done != want {
			t.Errorf("%q: done = %v, want %v", body, b.done, want)
		}
	}
}

func TestRetryAfterHeaders(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		ms, s string
		want  time.Duration
	}{
		{"", "", 0},
		{"", "3", 3 * time.Second},
		{"250", "3", 250 * time.Millisecond},
		{"-5", "3", 3 * time.Second},
		{"soon", "", 0},
		{"", "0", 0},
		{"", "-1", 0},
		{"", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{"", now.Add(-30 * time.Second).Format(http.TimeFormat), 0},
		{"", "1e300", time.Duration(1<<63 - 1)},
	}
	for _, tc := range cases {
		h := http.Header{}
		if tc.ms != "" {
			h.Set("Retry-After-Ms", tc.ms)
		}
		if tc.s != "" {
			h.Set("Retry-After", tc.s)
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("retry-after-ms %q, retry-after %q: %v, want %v", tc.ms, tc.s, got, tc.want)
		}
	}
}
