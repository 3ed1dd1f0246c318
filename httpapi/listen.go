package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// OpenAPI is the OpenAPI 3.1 document of the API (httpapi/openapi.yaml),
// served at GET /v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openAPI is GET /v1/openapi.yaml.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPI)
}

// ErrTokenRequired is the refusal of a non-loopback address without a
// token.
var ErrTokenRequired = errors.New("a bearer token is required to listen on an address that is not loopback")

// EnvToken is the environment variable of the token of `worker --http` and
// `starter serve` (--http-token).
const EnvToken = "SESSIONFLOW_HTTP_TOKEN"

// ListenAddress resolves the address of --http: a bare port ("8080" or
// ":8080") is 127.0.0.1 on that port; anything else is as given. It
// reports whether the host is loopback (a host name other than localhost
// is not).
func ListenAddress(addr string) (string, bool, error) {
	if _, err := strconv.Atoi(addr); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("the HTTP address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), loopbackHost(host), nil
}

// Listen listens on addr (ListenAddress), refusing a non-loopback address
// without a token (ErrTokenRequired).
func Listen(addr, token string) (net.Listener, error) {
	a, loopback, err := ListenAddress(addr)
	if err != nil {
		return nil, err
	}
	if !loopback && token == "" {
		return nil, fmt.Errorf("%w: %s (give --http-token or %s)", ErrTokenRequired, a, EnvToken)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("listen for the HTTP API on %s: %w", a, err)
	}
	return ln, nil
}

// Serve serves s on ln until ctx ends, then closes s's streams and shuts
// the HTTP server down (requests in flight get up to five seconds). It
// returns nil after ctx ended.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		s.Close()
		return err
	case <-ctx.Done():
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
