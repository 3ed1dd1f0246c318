package openai_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/provider/openai"
)

// refuse answers every request with status, headers and body.
func refuse(status int, headers map[string]string, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

func TestHTTPFailures(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		headers map[string]string
		body    string
		// want
		retryable  bool
		code, msg  string
		retryAfter time.Duration
	}{
		{name: "429 retry-after seconds", status: 429, headers: map[string]string{"Retry-After": "7"},
			body:      `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			retryable: true, code: "rate_limit_exceeded", msg: "Rate limit reached", retryAfter: 7 * time.Second},
		{name: "429 retry-after-ms wins", status: 429, headers: map[string]string{"Retry-After": "7", "Retry-After-Ms": "1500"},
			body:      `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`,
			retryable: true, code: "rate_limit_exceeded", msg: "Rate limit reached", retryAfter: 1500 * time.Millisecond},
		{name: "429 fractional seconds", status: 429, headers: map[string]string{"Retry-After": "0.25"},
			body:      `{"error":{"message":"slow down","type":"rate_limit_error"}}`,
			retryable: true, code: "rate_limit_error", msg: "slow down", retryAfter: 250 * time.Millisecond},
		{name: "500", status: 500,
			body:      `{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":null}}`,
			retryable: true, code: "server_error", msg: "The server had an error while processing your request."},
		{name: "503 with retry-after", status: 503, headers: map[string]string{"Retry-After": "2"},
			body:      `{"error":{"message":"Service Unavailable","type":"service_unavailable_error"}}`,
			retryable: true, code: "service_unavailable_error", msg: "Service Unavailable", retryAfter: 2 * time.Second},
		{name: "502 not JSON", status: 502, body: "<html><body>Bad gateway</body></html>",
			retryable: true, msg: "<html><body>Bad gateway</body></html>"},
		{name: "400", status: 400,
			body: `{"error":{"message":"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.","type":"invalid_request_error","param":"messages","code":"empty_array"}}`,
			code: "empty_array", msg: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."},
		{name: "400 ignores retry-after", status: 400, headers: map[string]string{"Retry-After": "5"},
			body: `{"error":{"message":"bad","type":"invalid_request_error"}}`,
			code: "invalid_request_error", msg: "bad"},
		{name: "403", status: 403, body: `{"error":{"message":"Country not supported","type":"forbidden","code":"unsupported_country"}}`,
			code: "unsupported_country", msg: "Country not supported"},
		{name: "404", status: 404, body: `{"error":{"message":"The model 'nope' does not exist","type":"invalid_request_error","code":"model_not_found"}}`,
			code: "model_not_found", msg: "The model 'nope' does not exist"},
		{name: "404 empty body", status: 404, body: "", msg: "Not Found"},
		{name: "400 vLLM shape", status: 400,
			body: `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`,
			code: "BadRequestError", msg: "max_tokens is too large"},
		{name: "404 error text", status: 404, body: `{"error":"model 'x' not found, try pulling it first"}`,
			msg: "model 'x' not found, try pulling it first"},
		{name: "422 detail", status: 422, body: `{"detail":"Field required"}`, msg: "Field required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, refuse(tc.status, tc.headers, tc.body))
			got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
			pe := providerError(t, got.err)
			if pe.Status != tc.status || pe.Retryable != tc.retryable || pe.Code != tc.code || pe.Message != tc.msg {
				t.Fatalf("error = %#v\nwant status %d retryable %v code %q message %q", pe, tc.status, tc.retryable, tc.code, tc.msg)
			}
			if pe.RetryAfter != tc.retryAfter {
				t.Fatalf("RetryAfter = %v, want %v", pe.RetryAfter, tc.retryAfter)
			}
			if len(got.chunks) != 0 || got.errs != 1 {
				t.Fatalf("chunks %d, errors %d; want 0 and 1", len(got.chunks), got.errs)
			}
			if n := len(svc.requests()); n != 1 {
				t.Fatalf("the service got %d requests; the SDK must not retry", n)
			}
		})
	}
}

func TestRetryAfterAsHTTPDate(t *testing.T) {
	at := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	svc := newService(t, refuse(429, map[string]string{"Retry-After": at}, `{"error":{"message":"later"}}`))
	pe := providerError(t, collect(context.Background(), svc.provider(t, nil), simpleRequest()).err)
	// The date has a resolution of one second.
	if pe.RetryAfter < 80*time.Second || pe.RetryAfter > 91*time.Second {
		t.Fatalf("RetryAfter = %v, want about 90s", pe.RetryAfter)
	}
}

func TestUnauthorizedNeverShowsTheKey(t *testing.T) {
	// A service that echoes the credential it refused, in the message and
	// the code.
	var logs bytes.Buffer
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key %s"}}`, key, key)
	})
	got := collect(context.Background(), svc.provider(t, &logs), simpleRequest())
	pe := providerError(t, got.err)
	if pe.Retryable || pe.Status != 401 {
		t.Fatalf("error = %#v, want a refusal with status 401", pe)
	}
	want := "Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys."
	if pe.Message != want || pe.Code != "invalid_api_key [redacted]" {
		t.Fatalf("message %q code %q, want %q", pe.Message, pe.Code, want)
	}
	noKey(t, "the error", got.err.Error(), fmt.Sprintf("%v %+v %#v", got.err, got.err, pe))
	if !strings.Contains(logs.String(), "model call failed") {
		t.Fatalf("the failure was not logged: %q", logs.String())
	}
	noKey(t, "the log", logs.String())
}

func TestNonJSONErrorBodyEchoingTheKeyIsRedacted(t *testing.T) {
	var logs bytes.Buffer
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		fmt.Fprintf(w, "denied: %s", r.Header.Get("Authorization"))
	})
	got := collect(context.Background(), svc.provider(t, &logs), simpleRequest())
	pe := providerError(t, got.err)
	if pe.Retryable || pe.Status != 401 || pe.Message != "denied: Bearer [redacted]" {
		t.Fatalf("error = %#v", pe)
	}
	noKey(t, "the error", got.err.Error())
	noKey(t, "the log", logs.String())
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	svc := newService(t, refuse(200, nil, ""))
	p := svc.provider(t, nil)
	svc.srv.Close()
	pe := providerError(t, collect(context.Background(), p, simpleRequest()).err)
	if !pe.Retryable || pe.Code != "connection_error" || pe.Status != 0 {
		t.Fatalf("error = %#v", pe)
	}
}

func TestInvalidRequestsAreRefusedBeforeSending(t *testing.T) {
	svc := newService(t, refuse(500, nil, ""))
	p, err := openai.New(openai.Config{BaseURL: svc.srv.URL, APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	req := simpleRequest()
	req.Model = ""
	pe := providerError(t, collect(context.Background(), p, req).err)
	if pe.Retryable || pe.Code != "invalid_request" || pe.Message != "the request names no model and the provider has no default model" {
		t.Fatalf("no model: %#v", pe)
	}
	req = simpleRequest()
	req.Tools = append(req.Tools, providerTool("bad", "", `[1]`))
	pe = providerError(t, collect(context.Background(), p, req).err)
	if pe.Retryable || pe.Code != "invalid_request" || pe.Message != `tool "bad": its schema is not a JSON object` {
		t.Fatalf("bad schema: %#v", pe)
	}
	req = simpleRequest()
	req.Messages[0].Role = "system"
	pe = providerError(t, collect(context.Background(), p, req).err)
	if pe.Retryable || pe.Message != `message 0: unknown role "system"` {
		t.Fatalf("bad role: %#v", pe)
	}
	if n := len(svc.requests()); n != 0 {
		t.Fatalf("%d requests were sent", n)
	}
}
